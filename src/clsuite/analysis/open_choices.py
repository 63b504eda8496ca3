"""The paper's open choices (docs/PROTOCOL.md, section 8): each one's config key, the value the paper's
words point to, and its default under a reading. Measured by ``clsuite.analysis.choices``; the cell
checks (``clsuite.analysis.cells``) pair by the same defaults."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from clsuite.analysis.defaults import default_of
from clsuite.config.home import CONF_DIR

PREFIX = "choices_"

NO_DEFAULT = object()  # a reading without a file (unlabelled runs): nothing to pair with


@dataclass(frozen=True)
class Choice:
    name: str  # experiment multirun/choices_<name>/, sweep sweeps/choices_<name>.yaml
    title: str
    key: str  # the config key, as in the results file's config
    paper_value: str | None  # the value the paper's words point to (None: they do not say)
    paper: str  # the paper's words

    @property
    def experiment(self) -> str:
        return PREFIX + self.name

    def default(self, reading: str, benchmark: str, method: str):
        """The reading's default value of the choice for this benchmark and method (step 2);
        :data:`NO_DEFAULT` when the reading has no file."""
        if not (Path(CONF_DIR) / "reading" / f"{reading}.yaml").is_file():
            return NO_DEFAULT
        return default_of(benchmark, method, reading)[0].get(self.key)

    def own_keys(self, flat_keys) -> set:
        """The config keys that carry the choice: the key and the policy keys interpolating it."""
        leaf = self.key.split(".")[-1]
        return {k for k in flat_keys if k == self.key or k.endswith("." + leaf)}


CHOICES = (
    Choice("unscored", "E-BRS: stored score of a sample never scored", "method.update.unscored",
           None, "silent: Alg. 2 writes M[N] <- (x, y) and evicts by argmin s(m); no score is given to a new sample"),
    Choice("victim", "E-BRS: the victim in the most frequent class", "method.update.victim",
           "lowest_score", "Alg. 2 line 8, \"m = argmin_m (s(m) | y_m = ỹ)\"; Sec. IV-B: \"By removing the least "
           "important memory examples in Line 8, E-BRS prevents the most forgotten memory example from being replaced\""),
    Choice("R_t_from", "C-CMR: where R_t is drawn from", "method.replay.R_t_from", "memory",
           "Sec. IV-A: \"the number of training memories from M − R_e captured in R_t\" (memory = M − R_e)"),
    Choice("candidates", "C-CMR: C = 50 candidates or all of M", "candidates", "null",
           "Eq. 4: \"where s ∈ R^{M×1}\": every memory sample is scored (null = all of M)"),
    Choice("replay_loss", "The replay loss: split or concat", "replay_loss", "concat",
           "Alg. 1 line 10: \"θ = θ − α∇_θ l(f_θ; (R + B_t))\": one loss over R and B_t together"),
    Choice("stored_logits", "Scores against stored logits (MIR's code)", "compare_to_old_logits",
           "false", "Eq. 4: \"s(m) = l(f_θ'(x_m), y_m) − l(f_θ(x_m), y_m)\": no stored logits"),
    Choice("logits_on_overwrite", "Stored logits of an overwritten slot: reset or the previous occupant's (MIR's code)",
           "logits_on_overwrite", None,
           "silent: Eq. 4 has no stored logits (MIR's code keeps the previous occupant's: buffer.py add_reservoir)"),
)  # fmt: skip
BY_EXPERIMENT = {c.experiment: c for c in CHOICES}


def show(v) -> str:
    """A value as the command line writes it: null, true/false, 0, inf, 50, insertion; a class by its name."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str) and v.startswith("clsuite."):
        return v.rsplit(".", 1)[1]
    if isinstance(v, float):
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        if v == int(v):
            return str(int(v))
    return str(v)
