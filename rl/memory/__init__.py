"""memory: where transitions wait between acting and learning, laid out by field specs.

``spec.py`` derives the fields from the spaces and the actor's extras;
``rollout.py`` holds on-policy rollouts, ``replay.py`` the replay that stores
each observation once.
"""
