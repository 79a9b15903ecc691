"""Training: labelled tables read and checked, the training engine, the default build and the fine-tune service.

``data/`` reads and checks labelled tables, ``training.py`` is the one training loop every fine-tune runs,
``default_model.py`` the offline default model's recipe, ``finetune/`` the service the Fine-tune tab and the CLI
share. Imports models/ and the shared kernel only.
"""
