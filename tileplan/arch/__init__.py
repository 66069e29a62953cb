"""Accelerator descriptions: schema (``spec``), loading (``load``) and shipped presets."""

from tileplan.arch.load import from_dict, load, load_eplanner_json, load_yaml, preset_names
from tileplan.arch.spec import Arch, Axis, AxisMode, Cores, Dram, Memory, PEArray

__all__ = ["Arch", "Axis", "AxisMode", "Cores", "Dram", "Memory", "PEArray", "from_dict", "load",
           "load_eplanner_json", "load_yaml", "preset_names"]
