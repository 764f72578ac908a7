#!/usr/bin/env node
'use strict';
/**
 * Plays uniformly random actions on an env served by rl's env server.
 *
 *   node random_agent.js --address 127.0.0.1:50051 --env CartPole-v1 --num_envs 4 \
 *       --episodes 10 --seed 0 [--stream]
 *
 * Opens a session of --num_envs copies with autoreset, resets it with --seed (copy i
 * gets seed + i), samples actions from a generator seeded with --seed, and prints one
 * JSON line per finished episode and a summary line. The auth token comes from
 * $RL_ENV_SERVER_TOKEN. Exit codes: 0 done, 1 the server refused or failed, 2 bad flags.
 */
const { parseArgs } = require('node:util');
const {
  EnvServerError,
  EnvSession,
  describeSpace,
  firstLine,
  mulberry32,
  row,
  sampleActions,
} = require('./env_client');

const USAGE =
  'usage: node random_agent.js --env ENV_ID [--address HOST:PORT] [--num_envs N] ' +
  '[--episodes N] [--seed S] [--kwargs JSON] [--timeout SECONDS] [--stream]';
const MAX_PRINTED_OBSERVATION = 64; // episode lines show final observations up to this size

class UsageError extends Error {}

function parseFlags(argv) {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        address: { type: 'string', default: '127.0.0.1:50051' },
        env: { type: 'string' },
        num_envs: { type: 'string', default: '1' },
        episodes: { type: 'string', default: '10' },
        seed: { type: 'string', default: '0' },
        kwargs: { type: 'string', default: '' },
        timeout: { type: 'string', default: '60' },
        stream: { type: 'boolean', default: false },
        help: { type: 'boolean', default: false },
      },
    }));
  } catch (e) {
    throw new UsageError(e.message.split('\n')[0]);
  }
  if (values.help) return null;
  if (!values.env) throw new UsageError('--env is required');
  const integer = (name, low) => {
    const text = values[name];
    if (!/^-?\d+$/.test(text) || Number(text) < low || !Number.isSafeInteger(Number(text))) {
      throw new UsageError(
        `--${name} must be an integer of at least ${low}, got ${JSON.stringify(text)}`,
      );
    }
    return Number(text);
  };
  let kwargs = null;
  if (values.kwargs) {
    try {
      kwargs = JSON.parse(values.kwargs);
    } catch (e) {
      throw new UsageError(`--kwargs must be a JSON object: ${e.message}`);
    }
    if (kwargs === null || typeof kwargs !== 'object' || Array.isArray(kwargs)) {
      throw new UsageError(`--kwargs must be a JSON object, got ${values.kwargs}`);
    }
  }
  const timeout = Number(values.timeout);
  if (!(timeout > 0)) {
    throw new UsageError(`--timeout must be a positive number of seconds, got ${values.timeout}`);
  }
  return {
    address: values.address,
    env: values.env,
    numEnvs: integer('num_envs', 1),
    episodes: integer('episodes', 1),
    seed: integer('seed', 0),
    kwargs,
    timeout,
    stream: values.stream,
  };
}

/** The final observation of copy `index` for an episode line, or undefined when it is
 * not one tensor of at most MAX_PRINTED_OBSERVATION values. */
function printable(observations, index) {
  if (!observations || !Array.isArray(observations.values)) return undefined;
  const values = row(observations, index);
  return values.length <= MAX_PRINTED_OBSERVATION ? values : undefined;
}

/** Plays until flags.episodes episodes have ended, printing a line for each; the summary. */
async function play(session, flags) {
  const started = Date.now();
  await session.make({
    envId: flags.env,
    numEnvs: flags.numEnvs,
    autoreset: true,
    kwargs: flags.kwargs,
  });
  if (['tuple', 'dict'].includes(session.actionSpace.kind)) {
    throw new EnvServerError(
      `${flags.env} has a ${describeSpace(session.actionSpace)} action space: this agent samples ` +
        'Discrete, Box, MultiDiscrete and MultiBinary actions only',
    );
  }
  await session.reset(flags.seed);
  const uniform = mulberry32(flags.seed);
  const returns = new Array(flags.numEnvs).fill(0);
  const lengths = new Array(flags.numEnvs).fill(0);
  const finished = [];
  let steps = 0;
  while (finished.length < flags.episodes) {
    const step = await session.step(sampleActions(session.actionSpace, flags.numEnvs, uniform));
    // A server that echoes seq must echo this step's (rl's 0.1.0 server leaves it 0).
    if (step.seq !== 0 && step.seq !== session.seq) {
      throw new EnvServerError(`env server answered step ${session.seq} with seq ${step.seq}`);
    }
    steps += flags.numEnvs;
    for (let i = 0; i < flags.numEnvs && finished.length < flags.episodes; i++) {
      returns[i] += step.rewards[i];
      lengths[i] += 1;
      if (!(step.terminated[i] || step.truncated[i])) continue;
      const episode = {
        episode: finished.length + 1,
        copy: i,
        return: returns[i],
        length: lengths[i],
        terminated: step.terminated[i],
        truncated: step.truncated[i],
        final_observation: printable(step.finalObservations, i),
      };
      finished.push(episode);
      console.log(JSON.stringify(episode));
      returns[i] = 0;
      lengths[i] = 0;
    }
  }
  const episodeReturns = finished.map((e) => e.return);
  const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
  return {
    env: flags.env,
    num_envs: flags.numEnvs,
    stream: flags.stream,
    episodes: finished.length,
    mean_return: mean(episodeReturns),
    min_return: Math.min(...episodeReturns),
    max_return: Math.max(...episodeReturns),
    mean_length: mean(finished.map((e) => e.length)),
    steps,
    seconds: (Date.now() - started) / 1000,
  };
}

async function run(flags) {
  const session = new EnvSession(flags.address, {
    stream: flags.stream,
    timeoutSeconds: flags.timeout,
  });
  let summary;
  try {
    summary = await play(session, flags);
  } catch (e) {
    await session.close().catch(() => {}); // best effort: the server expires idle sessions
    throw e;
  }
  await session.close();
  console.log(JSON.stringify(summary));
}

async function main() {
  let flags;
  try {
    flags = parseFlags(process.argv.slice(2));
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    process.stderr.write(`random_agent: error: ${e.message}\n${USAGE}\n`);
    return 2;
  }
  if (flags === null) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  try {
    await run(flags);
    return 0;
  } catch (e) {
    process.stderr.write(`random_agent: error: ${firstLine(e && e.message ? e.message : e)}\n`);
    return 1;
  }
}

main().then((code) => {
  process.exitCode = code;
});
