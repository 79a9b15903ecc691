"""Training: labelled tables read and checked, the training engine, the default build and the fine-tune service.

``data/`` reads and checks labelled tables, ``training.py`` is the one training loop every fine-tune runs,
``tagger_training.py`` and ``answer_training.py`` what a tagger's and a reader's training add to it
(``answer_metrics.py``: SQuAD's exact match and F1, which judge a reader), ``default_model.py`` the offline default
model's recipe, ``finetune/`` the service the Fine-tune tab and the CLI
share. Imports models/ and the shared kernel only.
"""
