"""Step and episode metrics (ALF's eight, and the game score where rewards are clipped),
checkpointed as module buffers."""

from rlf.metrics.metrics import (AverageDiscountedReturnMetric, AverageEnvInfoMetric,
                                 AverageEpisodeLengthMetric, AverageEpisodeScoreMetric,
                                 AverageEpisodicAggregationMetric, AverageReturnMetric,
                                 AverageRewardMetric, EnvironmentSteps,
                                 EpisodicStartAverageDiscountedReturnMetric, NumberOfEpisodes,
                                 StepMetric, make_default_metrics, metric_results)

__all__ = [
    "AverageDiscountedReturnMetric", "AverageEnvInfoMetric", "AverageEpisodeLengthMetric",
    "AverageEpisodeScoreMetric", "AverageEpisodicAggregationMetric", "AverageReturnMetric",
    "AverageRewardMetric", "EnvironmentSteps", "EpisodicStartAverageDiscountedReturnMetric",
    "NumberOfEpisodes", "StepMetric", "make_default_metrics", "metric_results",
]
