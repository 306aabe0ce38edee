// GrpcServer + InferenceService in-process, bound to 127.0.0.1:0, called through the generated
// C++ stub: health, metadata and the error paths of ModelInfer on models that are not loaded
// (no runtimes here; tests/integration/grpc_integration_test.py serves real ones), and the
// repository RPCs against a fake RepositoryControl whose loads block until the test lets them go.
#include <grpcpp/create_channel.h>
#include <sys/stat.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/grpc/grpc_server.h"
#include "agent/grpc/grpc_status.h"
#include "agent/http/kserve_handler.h"
#include "agent/model/served_model.h"
#include "gtest/gtest.h"
#include "tests/support/stale_socket.h"
#include "tests/support/temp_dir.h"

namespace packrat {
namespace {

using inference::GRPCInferenceService;

constexpr auto kWait = std::chrono::seconds(20);

// Records calls; Load() and Unload() answer what `results` says, after waiting until
// `blocked` is false.
class FakeRepository : public RepositoryControl {
 public:
  std::vector<RepositoryModel> Index(bool ready_only) override {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.push_back(std::string("index:") + (ready_only ? "ready" : "all"));
    std::vector<RepositoryModel> out = {{"a", "1", "READY", ""}};
    if (!ready_only) out.push_back({"b", "", "UNAVAILABLE", "unloaded"});
    return out;
  }
  Status Load(const std::string& name) override { return Run("load:" + name); }
  Status Unload(const std::string& name) override { return Run("unload:" + name); }

  void Block() {
    std::lock_guard<std::mutex> lock(mu_);
    blocked_ = true;
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    blocked_ = false;
    cv_.notify_all();
  }
  // Waits until `n` calls are inside Load/Unload at once.
  bool WaitRunning(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kWait, [&] { return running_ >= n; });
  }
  void SetResult(const std::string& call, Status s) {
    std::lock_guard<std::mutex> lock(mu_);
    results_[call] = std::move(s);
  }
  std::vector<std::string> calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

 private:
  Status Run(const std::string& call) {
    std::unique_lock<std::mutex> lock(mu_);
    calls_.push_back(call);
    ++running_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return !blocked_; });
    --running_;
    const auto it = results_.find(call);
    return it == results_.end() ? Status::Ok() : it->second;
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool blocked_ = false;
  int running_ = 0;
  std::vector<std::string> calls_;
  std::map<std::string, Status> results_;
};

ModelConfig TinyConfig(const std::string& name) {
  ModelConfig m;
  m.name = name;
  m.path = "/nonexistent/tiny.pt";  // never loaded
  m.inputs = {{"x", DataType::kFp32, {-1, 16}}};
  m.outputs = {{"y", DataType::kFp32, {-1, 8}}};
  m.batching.max_batch = 8;
  m.instances = {{1, 1, 4}};
  return m;
}

class GrpcInferenceServiceTest : public ::testing::Test {
 protected:
  void StartServer(bool with_repository = true, ControlGate gate = ControlGate(),
                   std::string unix_socket = "", const AccessLog* access_log = nullptr) {
    GrpcServerOptions options;
    options.endpoint = {"127.0.0.1", 0};
    options.access_log = access_log;
    options.control_gate = std::move(gate);
    options.unix_socket = std::move(unix_socket);
    auto started = GrpcServer::Start(options, &models_, with_repository ? &repository_ : nullptr);
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    server_ = std::move(started).value();
    ASSERT_GT(server_->port(), 0);
    stub_ = GRPCInferenceService::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(server_->port()), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    repository_.Release();
    if (server_) server_->Stop(std::chrono::steady_clock::now() + std::chrono::seconds(5));
  }
  void AddModel(ModelConfig config) {
    const std::string name = config.name;
    models_.Put(name, std::make_shared<ServedModel>(std::move(config), ServedModelOptions{},
                                                    /*launcher=*/nullptr));
  }
  std::unique_ptr<grpc::ClientContext> Context() {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(std::chrono::system_clock::now() + kWait);
    return context;
  }

  FakeRepository repository_;
  ModelRegistry models_;  // outlives server_
  std::unique_ptr<GrpcServer> server_;
  std::unique_ptr<GRPCInferenceService::Stub> stub_;
};

TEST_F(GrpcInferenceServiceTest, HealthFollowsModelsAndShutdown) {
  StartServer();
  inference::ServerLiveResponse live;
  ASSERT_TRUE(stub_->ServerLive(Context().get(), {}, &live).ok());
  EXPECT_TRUE(live.live());
  inference::ServerReadyResponse ready;
  ASSERT_TRUE(stub_->ServerReady(Context().get(), {}, &ready).ok());
  EXPECT_TRUE(ready.ready());  // no models: nothing to wait for

  AddModel(TinyConfig("tiny"));  // loading
  ASSERT_TRUE(stub_->ServerReady(Context().get(), {}, &ready).ok());
  EXPECT_FALSE(ready.ready());
  inference::ModelReadyRequest model;
  model.set_name("tiny");
  inference::ModelReadyResponse model_ready;
  ASSERT_TRUE(stub_->ModelReady(Context().get(), model, &model_ready).ok());
  EXPECT_FALSE(model_ready.ready());

  // Unknown model or version: NOT_FOUND, not ready=false (as Triton).
  model.set_name("nope");
  grpc::Status s = stub_->ModelReady(Context().get(), model, &model_ready);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "unknown model 'nope'");
  model.set_name("tiny");
  model.set_version("2");
  s = stub_->ModelReady(Context().get(), model, &model_ready);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "model 'tiny' has no version '2'");

  models_.Remove("tiny");
  ASSERT_TRUE(stub_->ServerReady(Context().get(), {}, &ready).ok());
  EXPECT_TRUE(ready.ready());
  server_->SetShuttingDown();
  ASSERT_TRUE(stub_->ServerReady(Context().get(), {}, &ready).ok());
  EXPECT_FALSE(ready.ready());
  ASSERT_TRUE(stub_->ServerLive(Context().get(), {}, &live).ok());
  EXPECT_TRUE(live.live());
}

TEST_F(GrpcInferenceServiceTest, Metadata) {
  StartServer();
  AddModel(TinyConfig("tiny"));
  inference::ServerMetadataResponse server;
  ASSERT_TRUE(stub_->ServerMetadata(Context().get(), {}, &server).ok());
  EXPECT_EQ(server.name(), "packrat");
  EXPECT_FALSE(server.version().empty());
  EXPECT_EQ(std::vector<std::string>(server.extensions().begin(), server.extensions().end()),
            (std::vector<std::string>{"statistics", "logging", "model_repository"}));

  inference::ModelMetadataRequest request;
  request.set_name("tiny");
  inference::ModelMetadataResponse meta;
  ASSERT_TRUE(stub_->ModelMetadata(Context().get(), request, &meta).ok());
  EXPECT_EQ(meta.name(), "tiny");
  ASSERT_EQ(meta.versions_size(), 1);
  EXPECT_EQ(meta.versions(0), "1");
  EXPECT_EQ(meta.platform(), "pytorch_torchscript");
  ASSERT_EQ(meta.inputs_size(), 1);
  EXPECT_EQ(meta.inputs(0).name(), "x");
  EXPECT_EQ(meta.inputs(0).datatype(), "FP32");
  EXPECT_EQ(std::vector<int64_t>(meta.inputs(0).shape().begin(), meta.inputs(0).shape().end()),
            (std::vector<int64_t>{-1, 16}));
  ASSERT_EQ(meta.outputs_size(), 1);
  EXPECT_EQ(meta.outputs(0).name(), "y");
  EXPECT_EQ(meta.properties().at("state"), "LOADING");
  EXPECT_EQ(meta.properties().at("max_batch"), "8");

  request.set_name("nope");
  EXPECT_EQ(stub_->ModelMetadata(Context().get(), request, &meta).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(GrpcInferenceServiceTest, InferErrorsBeforeTheBatcher) {
  StartServer();
  AddModel(TinyConfig("tiny"));
  ModelConfig gpt = TinyConfig("gpt");
  gpt.generation.enabled = true;
  AddModel(gpt);

  inference::ModelInferRequest request;
  request.set_model_name("nope");
  inference::ModelInferResponse response;
  grpc::Status s = stub_->ModelInfer(Context().get(), request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "unknown model 'nope'");

  request.set_model_name("tiny");
  s = stub_->ModelInfer(Context().get(), request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(s.error_message(), "model 'tiny' is not ready");

  request.set_model_name("gpt");
  s = stub_->ModelInfer(Context().get(), request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("/v2/models/gpt/generate"), std::string::npos)
      << s.error_message();

  // Streaming is not served.
  grpc::ClientContext context;
  auto stream = stub_->ModelStreamInfer(&context);
  stream->WritesDone();
  inference::ModelStreamInferResponse ignored;
  EXPECT_FALSE(stream->Read(&ignored));
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

// server.access_log covers the gRPC listener: one line per call, written before its status is
// sent, with the client's x-request-id (else the request's id) sent back, the trace id of its
// traceparent, and REST's status for the outcome beside the gRPC code.
TEST_F(GrpcInferenceServiceTest, EachCallIsAccessLoggedWithItsRequestAndTraceIds) {
  testing::TempDir dir("packrat-grpc-access");
  auto log = AccessLog::Open(AccessLog::Format::kJson, dir.path() + "/access.log");
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  StartServer(true, ControlGate(), "", log->get());
  AddModel(TinyConfig("tiny"));

  inference::ModelInferRequest request;
  request.set_model_name("tiny");
  request.set_id("infer-7");
  inference::ModelInferRequest::InferInputTensor* input = request.add_inputs();
  input->set_name("x");
  input->set_datatype("FP32");
  input->add_shape(3);
  input->add_shape(16);
  inference::ModelInferResponse response;
  auto infer = Context();
  infer->AddMetadata("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  EXPECT_EQ(stub_->ModelInfer(infer.get(), request, &response).error_code(),
            grpc::StatusCode::UNAVAILABLE);  // not loaded
  const auto echoed = infer->GetServerInitialMetadata().find("x-request-id");
  ASSERT_NE(echoed, infer->GetServerInitialMetadata().end());
  EXPECT_EQ(std::string(echoed->second.data(), echoed->second.size()), "infer-7");

  inference::ModelMetadataRequest metadata;
  metadata.set_name("nope");
  inference::ModelMetadataResponse ignored;
  auto meta = Context();
  meta->AddMetadata("x-request-id", "client-1");
  EXPECT_EQ(stub_->ModelMetadata(meta.get(), metadata, &ignored).error_code(),
            grpc::StatusCode::NOT_FOUND);

  std::ifstream in(dir.path() + "/access.log");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find(R"("listener":"grpc","request_id":"infer-7",)"
                          R"("trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","method":"POST",)"
                          R"("path":"/inference.GRPCInferenceService/ModelInfer","status":503,)"
                          R"("grpc_status":"UNAVAILABLE","model":"tiny","rows":3,)"),
            std::string::npos)
      << lines[0];
  EXPECT_NE(lines[1].find(R"("listener":"grpc","request_id":"client-1","method":"POST",)"
                          R"("path":"/inference.GRPCInferenceService/ModelMetadata","status":404,)"
                          R"("grpc_status":"NOT_FOUND",)"),
            std::string::npos)
      << lines[1];
}

// The access log's and the metrics' status of a gRPC call is what REST answers for the same
// outcome.
TEST(GrpcStatusTest, AGrpcCodesHttpStatusIsRestsForTheSameOutcome) {
  for (StatusCode code :
       {StatusCode::kOk, StatusCode::kInvalidArgument, StatusCode::kNotFound,
        StatusCode::kAlreadyExists, StatusCode::kResourceExhausted, StatusCode::kOutOfRange,
        StatusCode::kFailedPrecondition, StatusCode::kUnavailable, StatusCode::kDeadlineExceeded,
        StatusCode::kCancelled, StatusCode::kInternal, StatusCode::kUnauthenticated,
        StatusCode::kAborted}) {
    EXPECT_EQ(HttpStatusForGrpc(GrpcCodeFor(code)), HttpStatusFor(code)) << static_cast<int>(code);
  }
}

TEST_F(GrpcInferenceServiceTest, RepositoryCallsRunOffTheGrpcThreadsInParallel) {
  StartServer();
  repository_.Block();
  // Two loads in flight at once, each blocked inside the repository...
  struct Call {
    grpc::ClientContext context;
    inference::RepositoryModelLoadRequest request;
    inference::RepositoryModelLoadResponse response;
    grpc::Status status;
    bool done = false;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::unique_ptr<Call>> calls;
  for (const char* name : {"a", "b"}) {
    calls.push_back(std::make_unique<Call>());
    Call* call = calls.back().get();
    call->request.set_model_name(name);
    stub_->async()->RepositoryModelLoad(&call->context, &call->request, &call->response,
                                        [&, call](grpc::Status s) {
                                          std::lock_guard<std::mutex> lock(mu);
                                          call->status = std::move(s);
                                          call->done = true;
                                          cv.notify_all();
                                        });
  }
  ASSERT_TRUE(repository_.WaitRunning(2));
  // ...while the server answers everything else.
  inference::ServerLiveResponse live;
  EXPECT_TRUE(stub_->ServerLive(Context().get(), {}, &live).ok());
  repository_.SetResult("load:b", NotFound("no folder 'b'"));
  repository_.Release();
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, kWait, [&] { return calls[0]->done && calls[1]->done; }));
  }
  EXPECT_TRUE(calls[0]->status.ok()) << calls[0]->status.error_message();
  EXPECT_EQ(calls[1]->status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(calls[1]->status.error_message(), "no folder 'b'");
}

TEST_F(GrpcInferenceServiceTest, RepositoryIndexLoadUnload) {
  StartServer();
  inference::RepositoryIndexRequest index_request;
  inference::RepositoryIndexResponse index;
  ASSERT_TRUE(stub_->RepositoryIndex(Context().get(), index_request, &index).ok());
  ASSERT_EQ(index.models_size(), 2);
  EXPECT_EQ(index.models(0).name(), "a");
  EXPECT_EQ(index.models(0).version(), "1");
  EXPECT_EQ(index.models(0).state(), "READY");
  EXPECT_EQ(index.models(1).state(), "UNAVAILABLE");
  EXPECT_EQ(index.models(1).reason(), "unloaded");
  index_request.set_ready(true);
  index.Clear();
  ASSERT_TRUE(stub_->RepositoryIndex(Context().get(), index_request, &index).ok());
  EXPECT_EQ(index.models_size(), 1);
  index_request.set_repository_name("other");
  EXPECT_EQ(stub_->RepositoryIndex(Context().get(), index_request, &index).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);

  inference::RepositoryModelLoadRequest load;
  inference::RepositoryModelLoadResponse loaded;
  load.set_model_name("a");
  (*load.mutable_parameters())["ignored"].set_bool_param(true);
  EXPECT_TRUE(stub_->RepositoryModelLoad(Context().get(), load, &loaded).ok());
  repository_.SetResult("load:c", ResourceExhausted("needs 1 CPU(s) and 0 are free"));
  load.set_model_name("c");
  grpc::Status s = stub_->RepositoryModelLoad(Context().get(), load, &loaded);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(s.error_message(), "needs 1 CPU(s) and 0 are free");
  (*load.mutable_parameters())["config"].set_string_param("{}");
  EXPECT_EQ(stub_->RepositoryModelLoad(Context().get(), load, &loaded).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  load.clear_parameters();
  load.set_model_name("");
  EXPECT_EQ(stub_->RepositoryModelLoad(Context().get(), load, &loaded).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // KServe's Python messages put the model name in field 1, our repository_name.
  load.set_repository_name("k");
  EXPECT_TRUE(stub_->RepositoryModelLoad(Context().get(), load, &loaded).ok());
  load.set_model_name("a");  // both: a repository we do not have
  EXPECT_EQ(stub_->RepositoryModelLoad(Context().get(), load, &loaded).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);

  inference::RepositoryModelUnloadRequest unload;
  inference::RepositoryModelUnloadResponse unloaded;
  unload.set_model_name("a");
  (*unload.mutable_parameters())["unload_dependents"].set_bool_param(false);  // tritonclient
  EXPECT_TRUE(stub_->RepositoryModelUnload(Context().get(), unload, &unloaded).ok());
  repository_.SetResult("unload:z", NotFound("model 'z' is not loaded"));
  unload.set_model_name("z");
  EXPECT_EQ(stub_->RepositoryModelUnload(Context().get(), unload, &unloaded).error_code(),
            grpc::StatusCode::NOT_FOUND);

  EXPECT_EQ(repository_.calls(),
            (std::vector<std::string>{"index:all", "index:ready", "load:a", "load:c", "load:k",
                                      "unload:a", "unload:z"}));
}

// The repository RPCs are control calls: they pass the agent's one gate, as the REST
// management routes do. (They ran without the token: an unload by anyone who reached the port.)
TEST_F(GrpcInferenceServiceTest, RepositoryCallsPassTheControlGate) {
  StartServer(/*with_repository=*/true, ControlGate("s3cret"));
  inference::RepositoryModelLoadRequest load;
  inference::RepositoryModelLoadResponse loaded;
  load.set_model_name("a");
  inference::RepositoryModelUnloadRequest unload;
  inference::RepositoryModelUnloadResponse unloaded;
  unload.set_model_name("a");
  inference::RepositoryIndexResponse index;
  for (const char* credential : {"", "Bearer s3cre", "s3cret"}) {
    const auto with = [&] {
      std::unique_ptr<grpc::ClientContext> context = Context();
      if (*credential != '\0') context->AddMetadata("authorization", credential);
      return context;
    };
    EXPECT_EQ(stub_->RepositoryIndex(with().get(), {}, &index).error_code(),
              grpc::StatusCode::UNAUTHENTICATED)
        << credential;
    EXPECT_EQ(stub_->RepositoryModelLoad(with().get(), load, &loaded).error_code(),
              grpc::StatusCode::UNAUTHENTICATED)
        << credential;
    EXPECT_EQ(stub_->RepositoryModelUnload(with().get(), unload, &unloaded).error_code(),
              grpc::StatusCode::UNAUTHENTICATED)
        << credential;
  }
  EXPECT_TRUE(repository_.calls().empty());
  // Health is no control call.
  inference::ServerLiveResponse live;
  EXPECT_TRUE(stub_->ServerLive(Context().get(), {}, &live).ok());
  std::unique_ptr<grpc::ClientContext> context = Context();
  context->AddMetadata("authorization", "Bearer s3cret");
  EXPECT_TRUE(stub_->RepositoryModelUnload(context.get(), unload, &unloaded).ok());
  EXPECT_EQ(repository_.calls(), (std::vector<std::string>{"unload:a"}));
}

// The same service on a Unix socket (a sidecar's upstream on a shared hostPath): a stale file
// is replaced, the socket is open to every user, and it goes with the server.
TEST_F(GrpcInferenceServiceTest, ServesOnAUnixSocketTooAndRemovesItWhenStopped) {
  testing::TempDir dir("packrat-grpc-unix");
  const std::string path = dir.path() + "/grpc.sock";
  ASSERT_TRUE(testing::MakeStaleUnixSocket(path));  // as a killed agent leaves behind
  StartServer(/*with_repository=*/true, ControlGate(), path);
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666u);
  auto stub = GRPCInferenceService::NewStub(
      grpc::CreateChannel("unix:" + path, grpc::InsecureChannelCredentials()));
  inference::ServerLiveResponse live;
  ASSERT_TRUE(stub->ServerLive(Context().get(), {}, &live).ok());
  EXPECT_TRUE(live.live());
  server_->Stop(std::chrono::steady_clock::now() + std::chrono::seconds(5));
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST_F(GrpcInferenceServiceTest, WithoutARepositoryItsCallsAreUnimplemented) {
  StartServer(/*with_repository=*/false);
  inference::ServerMetadataResponse server;
  ASSERT_TRUE(stub_->ServerMetadata(Context().get(), {}, &server).ok());
  EXPECT_EQ(std::vector<std::string>(server.extensions().begin(), server.extensions().end()),
            (std::vector<std::string>{"statistics", "logging"}));
  inference::RepositoryIndexResponse index;
  grpc::Status s = stub_->RepositoryIndex(Context().get(), {}, &index);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(s.error_message(), "this server has no model repository");
  inference::RepositoryModelLoadRequest load;
  load.set_model_name("a");
  inference::RepositoryModelLoadResponse loaded;
  EXPECT_EQ(stub_->RepositoryModelLoad(Context().get(), load, &loaded).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
}

TEST_F(GrpcInferenceServiceTest, StopAcceptingRefusesNewCallsButHealthChecks) {
  StartServer();
  AddModel(TinyConfig("tiny"));
  server_->SetShuttingDown();
  server_->StopAccepting();
  inference::ModelMetadataRequest request;
  request.set_name("tiny");
  inference::ModelMetadataResponse meta;
  grpc::Status s = stub_->ModelMetadata(Context().get(), request, &meta);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(s.error_message(), "the server is shutting down");
  inference::ModelInferRequest infer;
  infer.set_model_name("tiny");
  inference::ModelInferResponse response;
  EXPECT_EQ(stub_->ModelInfer(Context().get(), infer, &response).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  inference::RepositoryIndexResponse index;
  EXPECT_EQ(stub_->RepositoryIndex(Context().get(), {}, &index).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  inference::ServerLiveResponse live;
  ASSERT_TRUE(stub_->ServerLive(Context().get(), {}, &live).ok());
  EXPECT_TRUE(live.live());
  inference::ServerReadyResponse ready;
  ASSERT_TRUE(stub_->ServerReady(Context().get(), {}, &ready).ok());
  EXPECT_FALSE(ready.ready());

  // After Stop() nothing answers.
  server_->Stop(std::chrono::steady_clock::now());
  s = stub_->ServerLive(Context().get(), {}, &live);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
}

TEST_F(GrpcInferenceServiceTest, PortInUseIsAnError) {
  StartServer();
  GrpcServerOptions options;
  options.endpoint = {"127.0.0.1", server_->port()};
  auto second = GrpcServer::Start(options, &models_, nullptr);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("cannot listen on 127.0.0.1:"), std::string::npos)
      << second.status().message();
}

}  // namespace
}  // namespace packrat
