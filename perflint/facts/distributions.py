"""What perflint knows of `torch.distributions`: which classes validate their parameters on
the host, and which sample with `torch.normal` (a host check of the scale)."""

from __future__ import annotations

# torch.distributions classes whose constructor validates its tensor parameters when
# `validate_args` is on (the default): class -> position of `validate_args` (torch 2.13).
# Independent, MixtureSameFamily and TransformedDistribution check no tensor values.
VALIDATING_DISTRIBUTIONS = {
    "Bernoulli": 2, "Beta": 2, "Binomial": 3, "Categorical": 2, "Cauchy": 2, "Chi2": 1,
    "ContinuousBernoulli": 3, "Dirichlet": 1, "Exponential": 1, "FisherSnedecor": 2,
    "Gamma": 2, "GeneralizedPareto": 3, "Geometric": 2, "Gumbel": 2, "HalfCauchy": 1,
    "HalfNormal": 1, "InverseGamma": 2, "Kumaraswamy": 2, "LKJCholesky": 2, "Laplace": 2,
    "LogNormal": 2, "LogisticNormal": 2, "LowRankMultivariateNormal": 3, "Multinomial": 3,
    "MultivariateNormal": 4, "NegativeBinomial": 3, "Normal": 2, "OneHotCategorical": 2,
    "OneHotCategoricalStraightThrough": 2, "Pareto": 2, "RelaxedBernoulli": 3,
    "RelaxedOneHotCategorical": 3, "StudentT": 3, "Poisson": 1, "Uniform": 2, "VonMises": 2,
    "Weibull": 2, "Wishart": 4,
}


# torch.distributions classes whose `sample()` is `torch.normal(loc, scale)` (under a transform
# for LogNormal and HalfNormal), and the wrappers that sample as the distribution they wrap.
NORMAL_SAMPLING = frozenset({"Normal", "LogNormal", "HalfNormal"})
DISTRIBUTION_WRAPPERS = frozenset({"Independent", "TransformedDistribution"})


def validating_distribution(qualname: str | None) -> str | None:
    """`torch.distributions[.<module>].Normal` -> "Normal" for classes that validate."""
    if not qualname or not qualname.startswith("torch.distributions."):
        return None
    parts = qualname.split(".")
    if len(parts) not in (3, 4):
        return None
    name = parts[-1]
    return name if name in VALIDATING_DISTRIBUTIONS else None
