"""games: two-player zero-sum board and hand games, and who plays them.

``spec.py`` names the games (PettingZoo's tic-tac-toe, connect four and
rock-paper-scissors), builds them and reduces an observation to features and a
legal-move mask. ``players.py`` holds the ``Player`` interface and the scripted
players of ``registry.players`` (random, first_legal, always_rock/paper/scissors,
one_step_lookahead, perfect). ``exact.py`` solves tic-tac-toe: perfect play, and a
policy's exact results over the whole game tree. ``versus.py`` turns one seat of a
game into a Gymnasium env for single-agent training, and ``artefact.py`` has
``ArtefactPlayer(path)``, a player acting with a run's policy artefact. Tournaments
between players live in rl/tournament. PettingZoo is imported only when a game is
built (the ``games`` extra), so listing names works without it.
"""

from rl.games import players  # noqa: F401  (registers the scripted players)
