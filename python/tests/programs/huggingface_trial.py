"""A Hugging Face Trainer trial on the client (dltune.huggingface.DltuneCallback): the synthetic MLP of
mlp_trial.py as a PreTrainedModel-free torch module, which the Trainer accepts when forward returns a loss. Its
set-up (imports, data) is done once and each trial started warm from there where dltune offers it (dltune.run)."""
import torch
import torch.nn.functional as F
from transformers import Trainer, TrainingArguments

import dltune
import dltune.huggingface

inputs = torch.randn(512, 20, generator=torch.Generator().manual_seed(7))
labels = (inputs[:, :5].sum(1) > 0).long()


class Rows(torch.utils.data.Dataset):
    def __init__(self, x, y):
        self.x, self.y = x, y

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"inputs": self.x[i], "labels": self.y[i]}


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))

    def forward(self, inputs, labels=None):
        logits = self.net(inputs)
        return {"loss": F.cross_entropy(logits, labels), "logits": logits}


def error_rate(prediction):
    return {"error_rate": float((prediction.predictions.argmax(-1) != prediction.label_ids).mean())}


def train(trial):
    args = TrainingArguments(output_dir=str(trial.dir / "checkpoints"), max_steps=trial.max_train_steps,
                             eval_strategy="steps", eval_steps=trial.eval_every, save_strategy="steps",
                             save_steps=trial.eval_every, logging_steps=1, seed=trial.seed % 2**32,
                             learning_rate=trial.params["learning_rate"], per_device_train_batch_size=32,
                             report_to=[], disable_tqdm=True)
    trainer = Trainer(model=Mlp(), args=args, train_dataset=Rows(inputs[:448], labels[:448]),
                      eval_dataset=Rows(inputs[448:], labels[448:]), compute_metrics=error_rate,
                      callbacks=[dltune.huggingface.DltuneCallback(trial)])
    trainer.train(resume_from_checkpoint=dltune.huggingface.resume_checkpoint(trial))


dltune.run(train, defaults={"learning_rate": 0.05}, max_train_steps=60)
