"""Step and episode metrics (ALF's eight), checkpointed as module buffers."""

from rlf.metrics.metrics import (AverageDiscountedReturnMetric, AverageEnvInfoMetric,
                                 AverageEpisodeLengthMetric, AverageEpisodicAggregationMetric,
                                 AverageReturnMetric, AverageRewardMetric, EnvironmentSteps,
                                 EpisodicStartAverageDiscountedReturnMetric, NumberOfEpisodes,
                                 StepMetric, make_default_metrics, metric_results)

__all__ = [
    "AverageDiscountedReturnMetric", "AverageEnvInfoMetric", "AverageEpisodeLengthMetric",
    "AverageEpisodicAggregationMetric", "AverageReturnMetric", "AverageRewardMetric",
    "EnvironmentSteps", "EpisodicStartAverageDiscountedReturnMetric", "NumberOfEpisodes",
    "StepMetric", "make_default_metrics", "metric_results",
]
