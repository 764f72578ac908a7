"""Which policy drives which agent of a multi-agent env: the mapping and its checks.

A set names its policies and maps agents to them by name patterns, first match wins
(``fnmatch``: ``*`` is any run of characters), as in
``(("adversary_*", "predators"), ("agent_*", "prey"))``; ``(("*", "shared"),)`` is
one policy for every agent (parameter sharing). ``assign_policies`` resolves the mapping
for an env's agents and refuses, in one line naming the agents and what would fit:
an agent no pattern matches, a policy the set does not define, and one policy shared
by agents whose spaces differ (a network has one input and one output shape).
"""

import fnmatch
from typing import Dict, List, Mapping, Sequence, Tuple

from rl.errors import HParamsError

PolicyMapping = Sequence[Tuple[str, str]]  # (agent name pattern, policy name), in order
SHARED = (("*", "shared"),)  # every agent drives one policy


def policy_for(agent: str, mapping: PolicyMapping) -> str:
    """The policy of ``agent``: the first pattern of ``mapping`` its name matches; ""
    when none does."""
    for pattern, policy in mapping:
        if fnmatch.fnmatchcase(agent, pattern):
            return policy
    return ""


def assign_policies(
    agents: Sequence[str],
    spaces: Mapping[str, Tuple[object, object]],
    mapping: PolicyMapping,
    policies: Sequence[str],
) -> Dict[str, str]:
    """Each agent's policy, checked.

    Args:
        agents: the env's agents (``possible_agents``).
        spaces: agent -> (observation space, action space).
        mapping: (pattern, policy) pairs, first match wins.
        policies: the policies the set defines.

    Returns:
        agent -> policy, for every agent.

    Raises:
        HParamsError: an agent without a policy, a policy the set lacks, or agents of one
            policy whose spaces differ.
    """
    assigned = {agent: policy_for(agent, mapping) for agent in agents}
    unmatched = [agent for agent, policy in assigned.items() if not policy]
    if unmatched:
        patterns = ", ".join(pattern for pattern, _ in mapping) or "none"
        raise HParamsError(
            f"no policy for agent(s) {', '.join(unmatched)}: no pattern of the mapping "
            f'({patterns}) matches them; add one ("*" matches every agent)'
        )
    unknown = sorted({policy for policy in assigned.values() if policy not in policies})
    if unknown:
        raise HParamsError(
            f"the mapping names policy {', '.join(unknown)}, which the set does not define; "
            f"its policies: {', '.join(policies) or 'none'}"
        )
    for policy in dict.fromkeys(assigned.values()):
        check_shared_spaces(policy, [a for a in agents if assigned[a] == policy], spaces)
    return assigned


def check_shared_spaces(
    policy: str, agents: List[str], spaces: Mapping[str, Tuple[object, object]]
) -> None:
    """Raises HParamsError if the ``agents`` of one ``policy`` differ in their spaces."""
    first = agents[0]
    different = [agent for agent in agents[1:] if spaces[agent] != spaces[first]]
    if different:
        observation, action = spaces[first]
        other_observation, other_action = spaces[different[0]]
        raise HParamsError(
            f"policy {policy} is shared by agents whose spaces differ: {first} sees "
            f"{observation} and acts in {action}, {different[0]} sees {other_observation} "
            f"and acts in {other_action}; map them to separate policies (one per group, "
            "e.g. by name prefix)"
        )
