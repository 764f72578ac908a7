'use strict';
/**
 * A Node.js client of rl's env server: the protocol of ../../rl/envs/remote/env.proto,
 * loaded at runtime (no generated code).
 *
 * - Tensors: decodeTensor / encodeTensor turn {dtype, shape, little-endian bytes} into
 *   {dtype, shape, values} (values a flat array in row-major order) and back.
 * - Values and spaces: decodeValue (a tensor, an array for a tuple, an object for a dict)
 *   and decodeSpace.
 * - Actions: sampleActions draws uniformly random actions for every copy of a session.
 * - EnvSession: Make, Reset, Step (unary or over StepStream) and Close, with the auth
 *   token sent as `authorization: Bearer <token>` metadata and failures turned into one
 *   EnvServerError line.
 *
 * int64 and uint64 values become JavaScript numbers: exact up to 2^53.
 */
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const PROTO_PATH = path.resolve(__dirname, '..', '..', 'rl', 'envs', 'remote', 'env.proto');
const TOKEN_VARIABLE = 'RL_ENV_SERVER_TOKEN';
const MAX_MESSAGE_BYTES = 256 * 1024 * 1024; // as the Python client

// --- tensors -------------------------------------------------------------------------
// dtype name -> [bytes per element, read(view, offset), write(view, offset, value)];
// every read and write is little-endian, whatever the machine's byte order.
const DTYPES = {
  bool: [1, (v, o) => v.getUint8(o) !== 0, (v, o, x) => v.setUint8(o, x ? 1 : 0)],
  int8: [1, (v, o) => v.getInt8(o), (v, o, x) => v.setInt8(o, x)],
  uint8: [1, (v, o) => v.getUint8(o), (v, o, x) => v.setUint8(o, x)],
  int16: [2, (v, o) => v.getInt16(o, true), (v, o, x) => v.setInt16(o, x, true)],
  uint16: [2, (v, o) => v.getUint16(o, true), (v, o, x) => v.setUint16(o, x, true)],
  int32: [4, (v, o) => v.getInt32(o, true), (v, o, x) => v.setInt32(o, x, true)],
  uint32: [4, (v, o) => v.getUint32(o, true), (v, o, x) => v.setUint32(o, x, true)],
  int64: [
    8,
    (v, o) => Number(v.getBigInt64(o, true)),
    (v, o, x) => v.setBigInt64(o, BigInt(Math.trunc(x)), true),
  ],
  uint64: [
    8,
    (v, o) => Number(v.getBigUint64(o, true)),
    (v, o, x) => v.setBigUint64(o, BigInt(Math.trunc(x)), true),
  ],
  float16: [2, (v, o) => halfToNumber(v.getUint16(o, true)), null],
  float32: [4, (v, o) => v.getFloat32(o, true), (v, o, x) => v.setFloat32(o, x, true)],
  float64: [8, (v, o) => v.getFloat64(o, true), (v, o, x) => v.setFloat64(o, x, true)],
};

/** An IEEE 754 half-precision number (its 16 bits) as a JavaScript number. */
function halfToNumber(bits) {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >> 10) & 0x1f;
  const fraction = bits & 0x3ff;
  if (exponent === 0) return sign * fraction * 2 ** -24; // zero and subnormals
  if (exponent === 0x1f) return fraction ? NaN : sign * Infinity;
  return sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
}

function product(shape) {
  return shape.reduce((a, b) => a * b, 1);
}

/** A Tensor message as {dtype, shape, values}; throws on an unknown dtype or a byte count
 * that does not match the shape. */
function decodeTensor(tensor) {
  const dtype = tensor.dtype;
  if (!(dtype in DTYPES)) {
    throw new Error(
      `unknown tensor dtype ${JSON.stringify(dtype)}: valid: ${Object.keys(DTYPES).join(', ')}`,
    );
  }
  const shape = (tensor.shape || []).map(Number);
  const [size, read] = DTYPES[dtype];
  const count = product(shape);
  const data = tensor.data || Buffer.alloc(0);
  if (data.length !== count * size) {
    throw new Error(
      `tensor of shape [${shape}] and dtype ${dtype} needs ${count * size} bytes, got ${data.length}`,
    );
  }
  const view = new DataView(data.buffer, data.byteOffset, data.length);
  const values = new Array(count);
  for (let i = 0; i < count; i++) values[i] = read(view, i * size);
  return { dtype, shape, values };
}

/** {dtype, shape, values} (values flat, row-major) as a Tensor message. */
function encodeTensor({ dtype, shape, values }) {
  const entry = DTYPES[dtype];
  if (!entry || !entry[2]) throw new Error(`cannot send a ${dtype} tensor`);
  const [size, , write] = entry;
  if (values.length !== product(shape)) {
    throw new Error(`${values.length} values do not fill shape [${shape}]`);
  }
  const data = Buffer.alloc(values.length * size);
  const view = new DataView(data.buffer, data.byteOffset, data.length);
  values.forEach((x, i) => write(view, i * size, x));
  return { dtype, shape, data };
}

/** A Value message as a tensor ({dtype, shape, values}), an array (tuple) or an object
 * (dict, in the message's key order). */
function decodeValue(value) {
  switch (value.kind) {
    case 'tensor':
      return decodeTensor(value.tensor);
    case 'tuple':
      return (value.tuple.items || []).map(decodeValue);
    case 'dict': {
      const keys = value.dict.keys || [];
      const values = value.dict.values || [];
      if (keys.length !== values.length) {
        throw new Error('a dict value needs as many values as keys');
      }
      return Object.fromEntries(keys.map((k, i) => [k, decodeValue(values[i])]));
    }
    default:
      throw new Error('empty value: none of tensor, tuple, dict is set');
  }
}

/** Row `index` (along the first axis) of a batched tensor, as a flat array. */
function row(tensor, index) {
  const width = product(tensor.shape.slice(1));
  return tensor.values.slice(index * width, (index + 1) * width);
}

// --- spaces --------------------------------------------------------------------------
/** A Space message as a plain object with a `kind`: box {dtype, shape, low, high},
 * discrete {n, start}, multi_discrete {dtype, shape, nvec, start}, multi_binary {shape},
 * tuple {spaces}, dict {keys, spaces}. */
function decodeSpace(space) {
  const s = space[space.kind];
  switch (space.kind) {
    case 'box': {
      const low = decodeTensor(s.low);
      const high = decodeTensor(s.high);
      return {
        kind: 'box',
        dtype: low.dtype,
        shape: low.shape,
        low: low.values,
        high: high.values,
      };
    }
    case 'discrete':
      return { kind: 'discrete', n: Number(s.n), start: Number(s.start || 0) };
    case 'multi_discrete': {
      const nvec = decodeTensor(s.nvec);
      const start = s.start ? decodeTensor(s.start).values : nvec.values.map(() => 0);
      return {
        kind: 'multi_discrete',
        dtype: nvec.dtype,
        shape: nvec.shape,
        nvec: nvec.values,
        start,
      };
    }
    case 'multi_binary':
      return { kind: 'multi_binary', shape: (s.shape || []).map(Number) };
    case 'tuple':
      return { kind: 'tuple', spaces: (s.spaces || []).map(decodeSpace) };
    case 'dict':
      return { kind: 'dict', keys: s.keys || [], spaces: (s.spaces || []).map(decodeSpace) };
    default:
      throw new Error(
        'empty space: none of box, discrete, multi_discrete, multi_binary, tuple, dict is set',
      );
  }
}

/** A short description of a space, for messages. */
function describeSpace(space) {
  switch (space.kind) {
    case 'box':
      return `Box(${space.dtype}, [${space.shape}])`;
    case 'discrete':
      return `Discrete(${space.n}${space.start ? `, start=${space.start}` : ''})`;
    case 'multi_discrete':
      return `MultiDiscrete([${space.nvec}])`;
    case 'multi_binary':
      return `MultiBinary([${space.shape}])`;
    case 'tuple':
      return `Tuple(${space.spaces.map(describeSpace).join(', ')})`;
    default: {
      const entries = space.keys.map((k, i) => `${k}: ${describeSpace(space.spaces[i])}`);
      return `Dict(${entries.join(', ')})`;
    }
  }
}

// --- random actions ------------------------------------------------------------------
/** Mulberry32: a small seeded generator of uniform numbers in [0, 1). */
function mulberry32(seed) {
  let state = seed >>> 0;
  return function next() {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A standard normal sample (Box-Muller) from a uniform generator. */
function normal(uniform) {
  const u = 1 - uniform(); // in (0, 1]: its log is finite
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * uniform());
}

/** One Box entry: uniform within finite bounds; a normal where both bounds are infinite,
 * the bound plus or minus an exponential where one is (as Gymnasium samples). */
function sampleBoxEntry(low, high, integer, uniform) {
  const lowFinite = Number.isFinite(low);
  const highFinite = Number.isFinite(high);
  let x;
  if (lowFinite && highFinite) {
    if (integer) return Math.min(high, low + Math.floor(uniform() * (high - low + 1)));
    x = low + uniform() * (high - low);
  } else if (lowFinite) {
    x = low - Math.log(1 - uniform());
  } else if (highFinite) {
    x = high + Math.log(1 - uniform());
  } else {
    x = normal(uniform);
  }
  return integer ? Math.round(x) : x;
}

/** Uniformly random actions for `numEnvs` copies, batched as a Value message. Throws for
 * Tuple and Dict action spaces. */
function sampleActions(space, numEnvs, uniform) {
  const values = [];
  let dtype;
  let shape;
  switch (space.kind) {
    case 'discrete':
      dtype = 'int64';
      shape = [];
      for (let i = 0; i < numEnvs; i++) values.push(space.start + Math.floor(uniform() * space.n));
      break;
    case 'box': {
      dtype = space.dtype;
      shape = space.shape;
      const integer = !dtype.startsWith('float');
      for (let i = 0; i < numEnvs; i++) {
        for (let j = 0; j < space.low.length; j++) {
          values.push(sampleBoxEntry(space.low[j], space.high[j], integer, uniform));
        }
      }
      break;
    }
    case 'multi_discrete':
      dtype = space.dtype;
      shape = space.shape;
      for (let i = 0; i < numEnvs; i++) {
        for (let j = 0; j < space.nvec.length; j++) {
          values.push(space.start[j] + Math.floor(uniform() * space.nvec[j]));
        }
      }
      break;
    case 'multi_binary':
      dtype = 'int8'; // Gymnasium's MultiBinary dtype
      shape = space.shape;
      for (let i = 0; i < numEnvs * product(shape); i++) values.push(uniform() < 0.5 ? 0 : 1);
      break;
    default:
      throw new Error(
        `this client samples Discrete, Box, MultiDiscrete and MultiBinary actions, not ${describeSpace(space)}`,
      );
  }
  return { tensor: encodeTensor({ dtype, shape: [numEnvs, ...shape], values }) };
}

// --- the session ---------------------------------------------------------------------
/** A failed call to the env server, with its gRPC status code name (or null). */
class EnvServerError extends Error {
  constructor(message, code = null) {
    super(message);
    this.name = 'EnvServerError';
    this.code = code;
  }
}

const STATUS_NAMES = Object.fromEntries(
  Object.entries(grpc.status).map(([name, code]) => [code, name]),
);

/** The first line of a message (gRPC details and errors can span several). */
function firstLine(text) {
  const trimmed = String(text || '').trim();
  return trimmed.split('\n')[0];
}

/** What a gRPC error means, in one line. */
function describeError(address, error) {
  const code = STATUS_NAMES[error.code] || 'UNKNOWN';
  const details = firstLine(error.details || error.message);
  if (code === 'UNAUTHENTICATED') {
    return new EnvServerError(
      `env server ${address} refused the call (UNAUTHENTICATED: ${details}): ` +
        `set $${TOKEN_VARIABLE} to the server's token`,
      code,
    );
  }
  if (code === 'UNAVAILABLE') {
    return new EnvServerError(
      `env server ${address} is unreachable (UNAVAILABLE: ${details})`,
      code,
    );
  }
  if (code === 'DEADLINE_EXCEEDED') {
    return new EnvServerError(
      `env server ${address} did not answer in time (DEADLINE_EXCEEDED: ${details})`,
      code,
    );
  }
  return new EnvServerError(`env server ${address}: ${code}: ${details}`, code);
}

let packageDefinition = null;

/** env.proto as @grpc/proto-loader's package definition, loaded once. Its service entry
 * ('rl.envs.remote.EnvService') holds each method's (de)serializers, which turn messages
 * into the plain objects this module reads and back. */
function loadDefinition() {
  if (packageDefinition === null) {
    packageDefinition = protoLoader.loadSync(PROTO_PATH, {
      keepCase: true, // field names as in env.proto: session_id, final_observations, ...
      longs: Number,
      enums: String,
      defaults: true,
      oneofs: true, // a `kind` field names the member of each oneof that is set
    });
  }
  return packageDefinition;
}

/**
 * A session of `numEnvs` copies of one env on an env server.
 *
 *   const session = new EnvSession('127.0.0.1:50051');
 *   await session.make({ envId: 'CartPole-v1', numEnvs: 4, autoreset: true });
 *   const observations = await session.reset(0);
 *   const step = await session.step(actions);  // {observations, rewards, terminated, ...}
 *   await session.close();
 */
class EnvSession {
  /**
   * @param {string} address host:port of the server (plaintext).
   * @param {object} options
   * @param {string|null} options.token auth token (default: $RL_ENV_SERVER_TOKEN).
   * @param {boolean} options.stream step over one StepStream call instead of unary Steps.
   * @param {number} options.timeoutSeconds deadline of each unary call.
   */
  constructor(
    address,
    { token = process.env[TOKEN_VARIABLE] || null, stream = false, timeoutSeconds = 60 } = {},
  ) {
    const EnvService = grpc.loadPackageDefinition(loadDefinition()).rl.envs.remote.EnvService;
    this.address = address;
    this.client = new EnvService(address, grpc.credentials.createInsecure(), {
      'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
      'grpc.max_send_message_length': MAX_MESSAGE_BYTES,
    });
    this.metadata = new grpc.Metadata();
    if (token) this.metadata.set('authorization', `Bearer ${token}`);
    this.stream = stream;
    this.timeoutSeconds = timeoutSeconds;
    this.id = null;
    this.seq = 0;
    this._stream = null;
  }

  _call(method, request) {
    const deadline = new Date(Date.now() + this.timeoutSeconds * 1000);
    return new Promise((resolve, reject) => {
      this.client[method](request, this.metadata, { deadline }, (error, response) => {
        if (error) reject(describeError(this.address, error));
        else resolve(response);
      });
    });
  }

  /** Opens the session; sets observationSpace, actionSpace, maxEpisodeSteps, serverVersion. */
  async make({ envId, numEnvs, autoreset = true, kwargs = null, seed = null }) {
    const request = {
      env_id: envId,
      num_envs: numEnvs,
      kwargs_json: kwargs ? JSON.stringify(kwargs) : '',
      autoreset,
    };
    if (seed !== null) request.seed = seed;
    const response = await this._call('Make', request);
    this.id = response.session_id;
    this.numEnvs = numEnvs;
    this.observationSpace = decodeSpace(response.observation_space);
    this.actionSpace = decodeSpace(response.action_space);
    this.maxEpisodeSteps = response.max_episode_steps || null;
    this.serverVersion = response.server_version;
    return this;
  }

  /** Resets every copy (copy i with seed + i when a seed is given); the observations. */
  async reset(seed = null) {
    const request = { session_id: this.id, options_json: '' };
    if (seed !== null) request.seed = seed;
    const response = await this._call('Reset', request);
    return decodeValue(response.observations);
  }

  /** One step of every copy: `actions` is a Value message (see sampleActions). Returns
   * {observations, rewards, terminated, truncated, finalObservations (or null), seq}. */
  async step(actions) {
    this.seq += 1;
    const request = { session_id: this.id, actions, seq: this.seq };
    let response;
    if (this.stream) {
      if (this._stream === null) {
        this._stream = new StepStream(this.client, this.metadata, this.address);
      }
      response = await this._stream.step(request);
    } else {
      response = await this._call('Step', request);
    }
    return {
      observations: decodeValue(response.observations),
      rewards: decodeTensor(response.rewards).values,
      terminated: decodeTensor(response.terminated).values,
      truncated: decodeTensor(response.truncated).values,
      finalObservations: response.final_observations
        ? decodeValue(response.final_observations)
        : null,
      seq: Number(response.seq),
    };
  }

  /** Ends the step stream, closes the session on the server and the channel. */
  async close() {
    try {
      if (this._stream !== null) await this._stream.end();
      if (this.id !== null) await this._call('Close', { session_id: this.id });
    } finally {
      this._stream = null;
      this.id = null;
      // Not this.client.close(): grpc-js names a stub method after each RPC, also in
      // lower camel case, so `close` is the Close RPC here, not the channel's close.
      grpc.Client.prototype.close.call(this.client);
    }
  }
}

/** Steps over one bidirectional StepStream call: responses come back in request order. */
class StepStream {
  constructor(client, metadata, address) {
    this.address = address;
    this.pending = []; // {resolve, reject} of requests sent and not yet answered
    this.error = null;
    this.status = null;
    this.call = client.StepStream(metadata);
    this.call.on('data', (response) => {
      const waiting = this.pending.shift();
      if (waiting) waiting.resolve(response);
    });
    // Every call ends with a status; a failed one also emits 'error', which must have a
    // listener (or Node throws it) but says nothing the status does not.
    this.call.on('error', () => {});
    this.call.on('status', (status) => {
      this.status = status;
      this._fail(
        status.code === grpc.status.OK
          ? new EnvServerError(`env server ${address} ended the step stream early`)
          : describeError(address, status),
      );
    });
  }

  _fail(error) {
    this.error = this.error || error;
    for (const waiting of this.pending.splice(0)) waiting.reject(this.error);
  }

  step(request) {
    if (this.error) return Promise.reject(this.error);
    return new Promise((resolve, reject) => {
      this.pending.push({ resolve, reject });
      this.call.write(request);
    });
  }

  /** Half-closes the stream and waits for the server's status. */
  end() {
    return new Promise((resolve) => {
      if (this.status !== null) return resolve();
      this.call.once('status', () => resolve());
      this.call.end();
    });
  }
}

module.exports = {
  PROTO_PATH,
  TOKEN_VARIABLE,
  EnvServerError,
  EnvSession,
  decodeSpace,
  decodeTensor,
  decodeValue,
  describeSpace,
  encodeTensor,
  firstLine,
  loadDefinition,
  mulberry32,
  row,
  sampleActions,
};
