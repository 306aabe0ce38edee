// One generate request while its tokens come (POST .../generate and .../generate_stream): the
// ids so far, the stream they go to once its headers are out, and how to cancel the sequence.
//
// Threading: shared by the decoder's callbacks (its completion thread), the HTTP session's
// strand (Attach, the disconnect watch) and the handler; every method is thread-safe and none
// blocks (HttpStream::Write only queues).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/http/http_types.h"
#include "common/status.h"
#include "common/mutex.h"

namespace packrat {
namespace metrics {
class ModelMetrics;
}

class Generation {
 public:
  // `metrics` may be null; otherwise not owned and must outlive the object.
  Generation(std::string model, std::vector<int64_t> stop_ids,
             std::chrono::steady_clock::time_point received, metrics::ModelMetrics* metrics);

  // How to cancel the sequence; if Cancel() came first, it runs now.
  void SetCancel(std::function<void()> cancel);
  // Cancels the sequence, once however often it is asked (each failed write after the client
  // left, its disconnect, a failed Attach): each cancel the decoder gets is a message on its
  // runtime's request ring.
  void Cancel();

  // A token: kept, and sent as an event when streaming (queued until Attach).
  void Token(int32_t token, float prob, bool last, bool streaming);
  // The stream's headers are out: sends the events that came meanwhile, before any later one,
  // and finishes the stream if the sequence already ended.
  void Attach(std::shared_ptr<HttpStream> writer);
  // Streaming: the sequence ended; an error or a cancellation becomes an error event.
  void EndStream(const Status& status);

  // The non-streaming answer: the ids and the finish reason.
  std::string Response();

 private:
  std::string FinishReason(int32_t token) const;

  const std::string model_;
  const std::vector<int64_t> stop_ids_;
  const std::chrono::steady_clock::time_point received_;
  metrics::ModelMetrics* const metrics_;
  Mutex mu_;
  std::vector<int32_t> ids_ GUARDED_BY(mu_);
  std::string finish_reason_ GUARDED_BY(mu_) = "length";
  std::shared_ptr<HttpStream> writer_ GUARDED_BY(mu_);
  std::string pending_ GUARDED_BY(mu_);  // events before the writer
  bool finished_ GUARDED_BY(mu_) = false;
  std::function<void()> cancel_ GUARDED_BY(mu_);
  bool cancel_wanted_ GUARDED_BY(mu_) = false;
};

}  // namespace packrat
