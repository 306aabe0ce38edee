#include "agent/http/metrics_handler.h"

#include "agent/kserve/kserve_codec.h"
#include "agent/metrics/agent_metrics.h"

namespace packrat {

void MetricsHandler::Handle(HttpRequest request, HttpResponder respond) {
  const std::string path = request.target.substr(0, request.target.find('?'));
  HttpResponse r;
  if (path != "/metrics") {
    r.status = 404;
    r.body = ErrorJson("no route for " + request.target + "; metrics are at /metrics");
  } else if (request.method != "GET" && request.method != "HEAD") {
    r.status = 405;
    r.body = ErrorJson("use GET for /metrics");
  } else {
    r.content_type = std::string(metrics::kPrometheusContentType);
    r.body = metrics_->Render();
  }
  respond(std::move(r));
}

}  // namespace packrat
