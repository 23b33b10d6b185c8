// labkit/json.hpp: labkit/backend.hpp plus nlohmann::json, for backends that read or write the model
// config as JSON themselves (labkit::model_config, ModelState::config, TRITONBACKEND_ModelSetConfig).
// It adds about two seconds to every compile of the cell; backend.hpp alone does not need it.
#pragma once

#include "nlohmann/json.hpp"
#include "labkit/backend.hpp"
