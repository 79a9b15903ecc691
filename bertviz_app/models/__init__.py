"""Models: finding and loading them, what they are made of and what they answer.

The registry and catalog (registered names, folders, Hub ids), the family adapters x the head adapters
(``families.py``, ``heads.py``), encoding untrusted text, the composed forward pass, predictions, tagging (a token
classifier's pieces, words and entities: ``tagging.py``), calibration,
the architecture summary, the default model's background build and who owns what in public mode. Imports only
the shared kernel (config, errors, results); ``tests/test_layering.py`` holds the table of who imports whom.
"""
