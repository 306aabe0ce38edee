// Closed-loop load over one of the agent's three ways in: gRPC ModelInfer (raw tensors), REST
// with the binary tensor extension, or REST JSON. Each of `--concurrency` clients has its own
// connection (a gRPC channel of its own, not shared subchannels; an HTTP keep-alive connection)
// and sends its next request when the previous one is answered; the same random input every
// time. Latency is measured per request, from send to the whole answer received (the REST JSON
// answer is not parsed, the gRPC one is: what a client of each pays at least).
//
//   grpc_load --protocol grpc|rest-binary|rest-json --port P --model M --input NAME
//             --shape 1,16 [--host 127.0.0.1] [--concurrency 1] [--seconds 10] [--warmup 2]
//             [--health]
//
// --health sends the protocol's health check (ServerLive / GET /v2/health/live) instead: the
// floor of a round trip. Prints one line:
//   protocol=grpc model=tiny concurrency=1 requests=N errors=E rps=R p50_us=A p90_us=B p99_us=C
//   sent=S client_cpu_us=U
// (sent: every request sent, warm-up included; client_cpu_us: this process's CPU time per
// request sent, what the client side of the protocol costs.)
// (bench/grpc_vs_rest.sh runs the matrix and writes docs/benchmarks.md's table.)
#include <grpcpp/create_channel.h>
#include <grpcpp/support/channel_arguments.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/grpc/grpc_service.grpc.pb.h"
#include "tests/support/http_client.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string protocol;
  std::string host = "127.0.0.1";
  int port = 0;
  std::string model;
  std::string input;
  std::vector<int64_t> shape;
  int concurrency = 1;
  double seconds = 10;
  double warmup = 2;
  bool health = false;
};

int Usage(const std::string& why) {
  std::cerr << "grpc_load: " << why
            << "\nusage: grpc_load --protocol grpc|rest-binary|rest-json --port P --model M "
               "--input NAME --shape 1,16 [--host H] [--concurrency N] [--seconds S] "
               "[--warmup S] [--health]\n";
  return 2;
}

std::vector<int64_t> ParseShape(const std::string& text) {
  std::vector<int64_t> shape;
  std::stringstream in(text);
  std::string dim;
  while (std::getline(in, dim, ',')) shape.push_back(std::stoll(dim));
  return shape;
}

std::string ShapeJson(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(shape[i]);
  }
  out += ']';
  return out;
}

// One client: sends a request and waits for its answer; true if it succeeded.
class Client {
 public:
  virtual ~Client() = default;
  virtual bool Send() = 0;
};

class GrpcClient : public Client {
 public:
  GrpcClient(const Options& o, const std::vector<float>& data) : health_(o.health) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    stub_ = inference::GRPCInferenceService::NewStub(grpc::CreateCustomChannel(
        o.host + ":" + std::to_string(o.port), grpc::InsecureChannelCredentials(), args));
    request_.set_model_name(o.model);
    auto* in = request_.add_inputs();
    in->set_name(o.input);
    in->set_datatype("FP32");
    for (int64_t d : o.shape) in->add_shape(d);
    request_.add_raw_input_contents(reinterpret_cast<const char*>(data.data()),
                                    data.size() * sizeof(float));
  }
  bool Send() override {
    grpc::ClientContext context;
    if (health_) {
      inference::ServerLiveResponse live;
      return stub_->ServerLive(&context, {}, &live).ok();
    }
    inference::ModelInferResponse response;
    return stub_->ModelInfer(&context, request_, &response).ok() &&
           response.raw_output_contents_size() > 0;
  }

 private:
  const bool health_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
  inference::ModelInferRequest request_;
};

class RestClient : public Client {
 public:
  RestClient(const Options& o, const std::vector<float>& data)
      : http_(o.host, static_cast<uint16_t>(o.port)), health_(o.health) {
    target_ = "/v2/models/" + o.model + "/infer";
    std::string header = "{\"inputs\":[{\"name\":\"" + o.input +
                         "\",\"datatype\":\"FP32\",\"shape\":" + ShapeJson(o.shape);
    if (o.protocol == "rest-binary") {
      header +=
          ",\"parameters\":{\"binary_data_size\":" + std::to_string(data.size() * sizeof(float)) +
          "}}],\"parameters\":{\"binary_data_output\":true}}";
      headers_["Inference-Header-Content-Length"] = std::to_string(header.size());
      body_ = header;
      body_.append(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(float));
    } else {
      body_ = header + ",\"data\":[";
      char buf[32];
      for (size_t i = 0; i < data.size(); ++i) {
        const int n = std::snprintf(buf, sizeof(buf), "%s%.9g", i ? "," : "", data[i]);
        body_.append(buf, static_cast<size_t>(n));
      }
      body_ += "]}]}";
    }
  }
  bool Send() override {
    if (health_) return http_.Get("/v2/health/live").status == 200;
    return http_.Post(target_, body_, headers_).status == 200;
  }

 private:
  packrat::testing::HttpClient http_;
  const bool health_;
  std::string target_;
  std::string body_;
  std::map<std::string, std::string> headers_;
};

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i), v.end());
  return v[i];
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--protocol") {
      o.protocol = next();
    } else if (a == "--host") {
      o.host = next();
    } else if (a == "--port") {
      o.port = std::atoi(next().c_str());
    } else if (a == "--model") {
      o.model = next();
    } else if (a == "--input") {
      o.input = next();
    } else if (a == "--shape") {
      o.shape = ParseShape(next());
    } else if (a == "--concurrency") {
      o.concurrency = std::atoi(next().c_str());
    } else if (a == "--seconds") {
      o.seconds = std::atof(next().c_str());
    } else if (a == "--warmup") {
      o.warmup = std::atof(next().c_str());
    } else if (a == "--health") {
      o.health = true;
    } else {
      return Usage("unknown argument " + a);
    }
  }
  if (o.protocol != "grpc" && o.protocol != "rest-binary" && o.protocol != "rest-json") {
    return Usage("--protocol must be grpc, rest-binary or rest-json");
  }
  if (o.port <= 0 || o.concurrency < 1 || o.seconds <= 0)
    return Usage("bad --port, --concurrency or --seconds");
  if (!o.health && (o.model.empty() || o.input.empty() || o.shape.empty())) {
    return Usage("--model, --input and --shape are needed");
  }

  int64_t elements = 1;
  for (int64_t d : o.shape) elements *= d;
  std::vector<float> data(o.health ? 0 : static_cast<size_t>(elements));
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  for (float& f : data) f = normal(rng);

  std::vector<std::unique_ptr<Client>> clients;
  for (int c = 0; c < o.concurrency; ++c) {
    if (o.protocol == "grpc") {
      clients.push_back(std::make_unique<GrpcClient>(o, data));
    } else {
      clients.push_back(std::make_unique<RestClient>(o, data));
    }
  }
  const Clock::time_point start = Clock::now();
  const Clock::time_point measure_from =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.warmup));
  const Clock::time_point end = measure_from + std::chrono::duration_cast<Clock::duration>(
                                                   std::chrono::duration<double>(o.seconds));
  std::vector<std::vector<double>> latencies(clients.size());
  std::atomic<int64_t> errors{0};
  std::atomic<int64_t> sent{0};
  std::vector<std::thread> threads;
  for (size_t c = 0; c < clients.size(); ++c) {
    threads.emplace_back([&, c] {
      std::vector<double>& mine = latencies[c];
      while (true) {
        const Clock::time_point t0 = Clock::now();
        if (t0 >= end) break;
        const bool ok = clients[c]->Send();
        const Clock::time_point t1 = Clock::now();
        sent.fetch_add(1, std::memory_order_relaxed);
        if (t0 < measure_from) continue;
        if (!ok) {
          errors.fetch_add(1);
          continue;
        }
        mine.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<double> all;
  for (const auto& v : latencies) all.insert(all.end(), v.begin(), v.end());
  const double rps = static_cast<double>(all.size()) / o.seconds;
  const double p50 = Percentile(all, 0.50), p90 = Percentile(all, 0.90),
               p99 = Percentile(all, 0.99);
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double cpu_us = (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e6 +
                        usage.ru_utime.tv_usec + usage.ru_stime.tv_usec;
  std::printf(
      "protocol=%s model=%s concurrency=%d requests=%zu errors=%lld rps=%.0f p50_us=%.0f "
      "p90_us=%.0f p99_us=%.0f sent=%lld client_cpu_us=%.0f\n",
      o.protocol.c_str(), o.health ? "(health)" : o.model.c_str(), o.concurrency, all.size(),
      static_cast<long long>(errors.load()), rps, p50, p90, p99,
      static_cast<long long>(sent.load()),
      cpu_us / static_cast<double>(std::max<int64_t>(1, sent.load())));
  return errors.load() == 0 ? 0 : 1;
}
