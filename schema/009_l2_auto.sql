-- 009_l2_auto.sql — a retrain request may ask for the L2 penalty to be
-- chosen by cross-validation (PRAGMA user_version = 9).
--
-- train_settings.l2_auto = 1: "l2": "auto" (the l2 column then holds 0 and
-- the chosen penalty is in the model's hyper-parameters); 0: the l2 column
-- is the penalty. Rows written before this migration are fixed penalties.

ALTER TABLE train_settings ADD COLUMN l2_auto INTEGER NOT NULL DEFAULT 0
    CHECK (l2_auto IN (0, 1));
