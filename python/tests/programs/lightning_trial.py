"""A Lightning trial on the client (dltune.lightning.DltuneCallback): the synthetic MLP of mlp_trial.py, its set-up
(imports, data) done once and each trial started warm from there where dltune offers it (dltune.run)."""
import torch
import torch.nn.functional as F

import dltune
import dltune.lightning

try:
    import lightning.pytorch as pl
except ImportError:
    import pytorch_lightning as pl

inputs = torch.randn(512, 20, generator=torch.Generator().manual_seed(7))
labels = (inputs[:, :5].sum(1) > 0).long()
train_set = torch.utils.data.TensorDataset(inputs[:448], labels[:448])
valid_set = torch.utils.data.TensorDataset(inputs[448:], labels[448:])


class Mlp(pl.LightningModule):
    def __init__(self, learning_rate):
        super().__init__()
        self.learning_rate = learning_rate
        self.net = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))

    def training_step(self, batch, _):
        x, y = batch
        return F.cross_entropy(self.net(x), y)

    def validation_step(self, batch, _):
        x, y = batch
        self.log("val_error_rate", (self.net(x).argmax(1) != y).float().mean())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.learning_rate, momentum=0.9)


def train(trial):
    pl.seed_everything(trial.seed % 2**32, workers=True)
    trainer = pl.Trainer(max_steps=trial.max_train_steps, val_check_interval=trial.eval_every,
                         check_val_every_n_epoch=None, callbacks=[dltune.lightning.DltuneCallback(trial)],
                         enable_checkpointing=False, logger=False, enable_progress_bar=False, num_sanity_val_steps=0)
    trainer.fit(Mlp(trial.params["learning_rate"]),
                torch.utils.data.DataLoader(train_set, batch_size=32, shuffle=True),
                torch.utils.data.DataLoader(valid_set, batch_size=64), ckpt_path=dltune.lightning.resume_path(trial))


dltune.run(train, defaults={"learning_rate": 0.05}, max_train_steps=60)
