// Waiting for a served model's config to reach a state, the way an operator's tool would: the
// management API's long poll (GET /v2/models/{m}/config?wait_after=R answers once the model's
// revision passes R), so tests wait on events, never on sleeps or log lines.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "tests/support/http_client.h"

namespace packrat::testing {

// The config body of `model` once `done(body)` holds, or nullopt after `timeout` (or when a GET
// fails; `*why` then says what happened, where given).
std::optional<std::string> AwaitModelConfig(HttpClient& management, const std::string& model,
                                            const std::function<bool(const std::string&)>& done,
                                            std::chrono::seconds timeout = std::chrono::seconds(120),
                                            std::string* why = nullptr);

}  // namespace packrat::testing
