// The binding of each concept registers itself from its own file; module.cpp calls them.
#pragma once

#include <pybind11/pybind11.h>

void register_machine_profile(pybind11::module_& m);
void register_calibration(pybind11::module_& m);
