#include "agent/http/generation.h"

#include <algorithm>
#include <utility>

#include "agent/kserve/generate_codec.h"
#include "agent/metrics/agent_metrics.h"

namespace packrat {

Generation::Generation(std::string model, std::vector<int64_t> stop_ids,
                       std::chrono::steady_clock::time_point received,
                       metrics::ModelMetrics* metrics)
    : model_(std::move(model)),
      stop_ids_(std::move(stop_ids)),
      received_(received),
      metrics_(metrics) {}

void Generation::SetCancel(std::function<void()> cancel) {
  bool now;
  {
    MutexLock lock(&mu_);
    cancel_ = cancel;
    now = cancel_wanted_;
  }
  if (now) cancel();
}

void Generation::Cancel() {
  std::function<void()> cancel;
  {
    MutexLock lock(&mu_);
    if (cancel_wanted_) return;
    cancel_wanted_ = true;
    cancel = cancel_;
  }
  if (cancel) cancel();
}

void Generation::Token(int32_t token, float prob, bool last, bool streaming) {
  bool written;
  std::string event;
  {
    MutexLock lock(&mu_);
    if (ids_.empty() && metrics_ != nullptr) {
      metrics_->time_to_first_token().Observe(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - received_).count());
    }
    ids_.push_back(token);
    if (metrics_ != nullptr) metrics_->generated_tokens().Increment();
    if (last) finish_reason_ = FinishReason(token);
    if (!streaming) return;
    event = EncodeTokenEvent(static_cast<int64_t>(ids_.size()) - 1, token, prob,
                             last ? finish_reason_ : "");
    if (!writer_) {
      pending_ += event;  // the headers are not out yet
      return;
    }
    // Under the lock, so that events go out in order (Write only queues).
    written = writer_->Write(std::move(event));
  }
  if (!written) Cancel();  // the client is gone
}

void Generation::Attach(std::shared_ptr<HttpStream> writer) {
  bool written = true;
  bool finished;
  {
    // The waiting events are queued before any later one (Token writes under this lock) and
    // before the end (EndStream finishes only a stream it found attached).
    MutexLock lock(&mu_);
    writer_ = writer;
    if (!pending_.empty()) written = writer->Write(std::move(pending_));
    pending_.clear();
    finished = finished_;
  }
  if (!written) Cancel();
  if (finished) writer->Finish();
}

void Generation::EndStream(const Status& status) {
  std::shared_ptr<HttpStream> writer;
  {
    MutexLock lock(&mu_);
    // A cancellation too: a client that closed only its sending side (a half-close, which the
    // disconnect watch cannot tell from leaving) still reads, and learns why the stream ended.
    if (!status.ok()) pending_ += EncodeErrorEvent(status.message());
    finished_ = true;
    writer = writer_;
    if (writer && !pending_.empty()) {
      writer->Write(std::move(pending_));
      pending_.clear();
    }
  }
  if (writer) writer->Finish();
}

std::string Generation::Response() {
  MutexLock lock(&mu_);
  return EncodeGenerateResponse(model_, ids_, finish_reason_);
}

std::string Generation::FinishReason(int32_t token) const {
  return std::find(stop_ids_.begin(), stop_ids_.end(), token) != stop_ids_.end() ? "stop"
                                                                                 : "length";
}

}  // namespace packrat
