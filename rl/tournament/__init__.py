"""tournament: checkpoints and scripted players play each other; ratings come out.

``python -m rl.tournament`` (``cli.py``) plays every pair of players a fixed
number of games of one of rl.games' games and writes the payoff table, a heatmap,
Elo ratings with bootstrap intervals and the meta-game's Nash mixture
(docs/guides/tournaments.md). ``schedule.py`` says who plays whom, with which seed and
seat; ``play.py`` plays games in any process; ``records.py`` keeps games.jsonl,
from which a rerun resumes; ``ratings.py`` holds the maths (Bradley-Terry, the
bootstrap, Nash by linear programming) as pure functions; ``report.py`` writes
the outputs.
"""
