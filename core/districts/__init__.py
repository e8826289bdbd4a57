"""District geography, districting plans and what privacy noise does to districts (Cohen et al. 2021, §6-7).

The District maps page's one entry point is ``run(DistrictPlan(...))`` -> ``DistrictResult``.
"""
from core.districts.generators import (GENERATORS, DisconnParams, ExactParams, GreedyParams, ReComParams,
                                       SquareParams)
from core.districts.noise import ALGORITHMS, NoiseConfig
from core.districts.workflow import DistrictPlan, DistrictResult, EnsemblePlan, ERPlan, run

# the area's descriptor, registered for the shared machinery (core.areas); last, as it reads the above
from core.districts.area import AREA  # noqa: E402

__all__ = ["AREA", "ALGORITHMS", "DisconnParams", "DistrictPlan", "DistrictResult", "ERPlan", "EnsemblePlan", "ExactParams",
           "GENERATORS", "GreedyParams", "NoiseConfig", "ReComParams", "SquareParams", "run"]
