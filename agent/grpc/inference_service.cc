#include "agent/grpc/inference_service.h"

#include <grpcpp/support/message_allocator.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "agent/batching/inference_request.h"
#include "agent/config/triton_model_config.h"
#include "agent/grpc/grpc_status.h"
#include "agent/grpc/infer_codec.h"
#include "agent/http/kserve_handler.h"
#include "agent/kserve/log_settings.h"
#include "agent/model/served_model.h"
#include "common/logging.h"

#ifndef PACKRAT_VERSION
#define PACKRAT_VERSION "unknown"
#endif

namespace packrat {
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;

constexpr char kServerName[] = "packrat";  // as REST's GET /v2
// Repository calls waiting for one of the runner's threads before new ones are refused.
constexpr int kRepositoryThreads = 2;
constexpr size_t kMaxQueuedRepositoryCalls = 64;

Status ShuttingDown() { return Unavailable("the server is shutting down"); }

grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* context, const Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// The model `name` (at `version`, if given: a model has one), or NotFound as REST words it.
StatusOr<std::shared_ptr<ServedModel>> FindModel(const ModelRegistry& models,
                                                 const std::string& name,
                                                 const std::string& version) {
  std::shared_ptr<ServedModel> model = models.Find(name);
  if (model == nullptr) return models.Absent(name);  // UNAVAILABLE while loading or unloading
  if (!version.empty() && version != model->signature().version) {
    return NotFound("model '" + name + "' has no version '" + version + "'");
  }
  return model;
}

void AddTensors(
    const std::vector<TensorSpec>& specs,
    google::protobuf::RepeatedPtrField<inference::ModelMetadataResponse::TensorMetadata>* out) {
  for (const TensorSpec& spec : specs) {
    inference::ModelMetadataResponse::TensorMetadata* t = out->Add();
    t->set_name(spec.name);
    t->set_datatype(std::string(DataTypeName(spec.datatype)));
    for (const int64_t d : spec.shape) t->add_shape(d);
  }
}

// The earliest of `a` and the client's gRPC deadline (none: the far future), on the steady
// clock.
std::optional<SteadyTime> WithClientDeadline(std::optional<SteadyTime> a,
                                             const grpc::CallbackServerContext& context,
                                             SteadyTime now) {
  const auto client = context.deadline();
  if (client == std::chrono::system_clock::time_point::max()) return a;
  const auto left = client - std::chrono::system_clock::now();
  // Beyond a day counts as none (and would overflow the steady clock's arithmetic).
  if (left > std::chrono::hours(24)) return a;
  const SteadyTime at = now + std::chrono::duration_cast<SteadyTime::duration>(left);
  return a && *a < at ? *a : at;
}

// Counts one answered request in the model's metrics, as KserveHandler::Infer does.
void Count(metrics::ModelMetrics* m, SteadyTime received, const Status& status) {
  if (m != nullptr) m->Answered(HttpStatusFor(status.code()), received);
}

}  // namespace

// ModelInfer's request and response live in one shared object, so that the batcher's request
// can keep the protobuf message alive (DecodedRequest::keepalive) and read its
// raw_input_contents in place: no copy of the tensor bytes. gRPC releases its holder when the
// call is done; the messages go when the last holder lets go.
class InferenceService::InferAllocator
    : public grpc::MessageAllocator<ModelInferRequest, ModelInferResponse> {
 public:
  struct Messages {
    ModelInferRequest request;
    ModelInferResponse response;
  };

  class Holder : public grpc::MessageHolder<ModelInferRequest, ModelInferResponse> {
   public:
    Holder() : messages_(std::make_shared<Messages>()) {
      set_request(&messages_->request);
      set_response(&messages_->response);
    }
    void Release() override { delete this; }
    const std::shared_ptr<Messages>& messages() const { return messages_; }

   private:
    std::shared_ptr<Messages> messages_;
  };

  grpc::MessageHolder<ModelInferRequest, ModelInferResponse>* AllocateMessages() override {
    return new Holder();
  }
};

InferenceService::InferenceService(const ModelRegistry* models, RepositoryControl* repository,
                                   ControlGate gate, SharedMemoryRegistry* regions)
    : models_(models),
      repository_(repository),
      gate_(std::move(gate)),
      regions_(regions),
      infer_allocator_(std::make_unique<InferAllocator>()),
      repository_runner_(kRepositoryThreads, kMaxQueuedRepositoryCalls) {
  SetMessageAllocatorFor_ModelInfer(infer_allocator_.get());
}

InferenceService::~InferenceService() = default;

bool InferenceService::AllReady() const {
  return !shutting_down_.load(std::memory_order_acquire) && models_->Ready();
}

grpc::ServerUnaryReactor* InferenceService::ServerLive(grpc::CallbackServerContext* context,
                                                       const inference::ServerLiveRequest*,
                                                       inference::ServerLiveResponse* response) {
  response->set_live(true);
  return FinishNow(context, Status::Ok());
}

grpc::ServerUnaryReactor* InferenceService::ServerReady(grpc::CallbackServerContext* context,
                                                        const inference::ServerReadyRequest*,
                                                        inference::ServerReadyResponse* response) {
  response->set_ready(AllReady());
  return FinishNow(context, Status::Ok());
}

grpc::ServerUnaryReactor* InferenceService::ModelReady(grpc::CallbackServerContext* context,
                                                       const inference::ModelReadyRequest* request,
                                                       inference::ModelReadyResponse* response) {
  if (!accepting()) return FinishNow(context, ShuttingDown());
  // An unknown model is NOT_FOUND, not ready=false (Triton; tritonclient raises on it).
  StatusOr<std::shared_ptr<ServedModel>> model =
      FindModel(*models_, request->name(), request->version());
  if (!model.ok()) return FinishNow(context, model.status());
  response->set_ready((*model)->state() == ModelState::kReady &&
                      !shutting_down_.load(std::memory_order_acquire));
  return FinishNow(context, Status::Ok());
}

grpc::ServerUnaryReactor* InferenceService::ServerMetadata(
    grpc::CallbackServerContext* context, const inference::ServerMetadataRequest*,
    inference::ServerMetadataResponse* response) {
  if (!accepting()) return FinishNow(context, ShuttingDown());
  response->set_name(kServerName);
  response->set_version(PACKRAT_VERSION);
  response->add_extensions("statistics");
  response->add_extensions("logging");
  if (repository_ != nullptr) response->add_extensions("model_repository");
  if (regions_ != nullptr && regions_->enabled()) response->add_extensions("system_shared_memory");
  return FinishNow(context, Status::Ok());
}

grpc::ServerUnaryReactor* InferenceService::ModelMetadata(
    grpc::CallbackServerContext* context, const inference::ModelMetadataRequest* request,
    inference::ModelMetadataResponse* response) {
  if (!accepting()) return FinishNow(context, ShuttingDown());
  StatusOr<std::shared_ptr<ServedModel>> found =
      FindModel(*models_, request->name(), request->version());
  if (!found.ok()) return FinishNow(context, found.status());
  const ServedModel& model = **found;
  const ModelSignature& sig = model.signature();
  response->set_name(sig.name);
  response->add_versions(sig.version);
  response->set_platform(sig.platform);
  AddTensors(sig.inputs, response->mutable_inputs());
  AddTensors(sig.outputs, response->mutable_outputs());
  // What REST's metadata carries in `parameters`, in brief (GET /v2/models/{m} has it all).
  auto& properties = *response->mutable_properties();
  properties["state"] = std::string(ModelStateName(model.state()));
  if (const std::string detail = model.status_detail(); !detail.empty()) {
    properties["state_detail"] = detail;
  }
  properties["max_batch"] = std::to_string(sig.max_batch);
  if (const std::string failure = model.failure(); !failure.empty()) properties["reason"] = failure;
  return FinishNow(context, Status::Ok());
}

grpc::ServerUnaryReactor* InferenceService::ModelInfer(grpc::CallbackServerContext* context,
                                                       const ModelInferRequest* request,
                                                       ModelInferResponse* response) {
  if (!accepting()) return FinishNow(context, ShuttingDown());
  const LogScope log_scope(request->model_name(), request->id());
  StatusOr<std::shared_ptr<ServedModel>> found =
      FindModel(*models_, request->model_name(), request->model_version());
  // Unknown model names are not counted, so clients cannot create series (as REST).
  if (!found.ok()) return FinishNow(context, found.status());
  // A raw pointer from here on: a model answers every request it accepted before it goes.
  ServedModel* model = found->get();
  metrics::ModelMetrics* m = model->metrics();
  const SteadyTime received = std::chrono::steady_clock::now();
  if (m != nullptr) m->inflight().Increment();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto finish = [m, received, reactor](const Status& status) {
    Count(m, received, status);
    reactor->Finish(ToGrpcStatus(status));
  };

  if (model->generative()) {
    finish(InvalidArgument("model '" + model->name() +
                           "' is generative: use REST POST /v2/models/" + model->name() +
                           "/generate (gRPC serves ModelInfer of batch models only)"));
    return reactor;
  }
  if (model->state() != ModelState::kReady) {
    finish(Unavailable("model '" + model->name() + "' is not ready"));
    return reactor;
  }
  // With the allocator set, gRPC made the messages through it: keep them for the views.
  const auto* holder = dynamic_cast<const InferAllocator::Holder*>(context->GetRpcAllocatorState());
  if (holder == nullptr) {
    finish(Internal("ModelInfer's messages were not made by the service's allocator"));
    return reactor;
  }
  StatusOr<DecodedRequest> decoded =
      DecodeModelInferRequest(model->signature(), *request, holder->messages(), regions_);
  if (!decoded.ok()) {
    finish(decoded.status());
    return reactor;
  }

  auto done = [model, response, finish](const Status& status, InferenceRequest& req) {
    const Status answer = status.ok() ? EncodeModelInferResponse(model->signature(), req.decoded(),
                                                                 req.outputs(), response)
                                      : status;
    req.ReleaseSharedMemory();  // before the answer: its client may unregister the regions next
    finish(answer);
  };
  std::optional<SteadyTime> deadline;
  if (decoded->timeout_us) {
    deadline = received + std::chrono::microseconds(*decoded->timeout_us);
  } else if (const int64_t ms = model->config().batching.timeout_ms; ms > 0) {
    deadline = received + std::chrono::milliseconds(ms);
  }
  deadline = WithClientDeadline(deadline, *context, received);
  auto req =
      std::make_shared<InferenceRequest>(std::move(decoded).value(), std::move(done), received);
  if (deadline) req->set_deadline(*deadline);
  if (Status s = model->Submit(req); !s.ok()) {
    finish(s);
    return reactor;
  }
  PACKRAT_LOG(DEBUG) << "queued gRPC request '" << req->decoded().id << "' for model '"
                     << model->name() << "': " << req->rows() << " row(s)";
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::RunRepositoryCall(grpc::CallbackServerContext* context,
                                                              std::function<Status()> call) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const bool posted = repository_runner_.Post([reactor, call = std::move(call)] {
    Status s;
    try {
      s = call();
    } catch (const std::exception& e) {  // the repository is not ours: keep the call answered
      s = Internal(std::string("model repository: ") + e.what());
    }
    reactor->Finish(ToGrpcStatus(s));
  });
  if (!posted) {
    reactor->Finish(ToGrpcStatus(Unavailable(
        "the model repository is not taking calls (shutting down, or too many waiting)")));
  }
  return reactor;
}

namespace {

grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* context,
                                    const grpc::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

// The call's "authorization" metadata through the agent's one gate.
Status Admit(const grpc::CallbackServerContext& context, const ControlGate& gate) {
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  if (it == metadata.end()) return gate.Admit(std::nullopt);
  return gate.Admit(std::string_view(it->second.data(), it->second.size()));
}

grpc::Status NoRepository() {
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "this server has no model repository");
}

// A repository_name is not supported (Triton: UNIMPLEMENTED); this server has one repository.
grpc::Status RepositoryNameUnsupported(const std::string& repository_name) {
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                      "repository_name '" + repository_name +
                          "': this server has one model repository; leave it empty");
}

// The model a Load/Unload names. KServe's Python repository messages carry the model name in
// field 1, our repository_name (README-proto.md §7): with no model_name, it is taken from there.
grpc::Status RepositoryModelName(const std::string& repository_name, const std::string& model_name,
                                 std::string* name) {
  if (model_name.empty() && !repository_name.empty()) {
    *name = repository_name;
    return grpc::Status::OK;
  }
  if (!repository_name.empty()) return RepositoryNameUnsupported(repository_name);
  if (model_name.empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "model_name is empty");
  }
  *name = model_name;
  return grpc::Status::OK;
}

}  // namespace

grpc::ServerUnaryReactor* InferenceService::RepositoryIndex(
    grpc::CallbackServerContext* context, const inference::RepositoryIndexRequest* request,
    inference::RepositoryIndexResponse* response) {
  if (!accepting()) return FinishNow(context, ShuttingDown());
  if (const Status s = Admit(*context, gate_); !s.ok()) return FinishNow(context, ToGrpcStatus(s));
  if (repository_ == nullptr) return FinishNow(context, NoRepository());
  if (!request->repository_name().empty()) {
    return FinishNow(context, RepositoryNameUnsupported(request->repository_name()));
  }
  return RunRepositoryCall(context, [repository = repository_, ready = request->ready(), response] {
    for (const RepositoryModel& m : repository->Index(ready)) {
      inference::RepositoryIndexResponse::ModelIndex* entry = response->add_models();
      entry->set_name(m.name);
      entry->set_version(m.version);
      entry->set_state(m.state);
      entry->set_reason(m.reason);
    }
    return Status::Ok();
  });
}

grpc::ServerUnaryReactor* InferenceService::RepositoryModelLoad(
    grpc::CallbackServerContext* context, const inference::RepositoryModelLoadRequest* request,
    inference::RepositoryModelLoadResponse*) {
  if (!accepting()) return FinishNow(context, ShuttingDown());
  if (const Status s = Admit(*context, gate_); !s.ok()) return FinishNow(context, ToGrpcStatus(s));
  if (repository_ == nullptr) return FinishNow(context, NoRepository());
  std::string name;
  if (grpc::Status s =
          RepositoryModelName(request->repository_name(), request->model_name(), &name);
      !s.ok()) {
    return FinishNow(context, s);
  }
  // Triton's "config" and "file:<path>" parameters replace the model's files; here a load always
  // reads the model's folder. Other parameters are ignored.
  for (const auto& [key, value] : request->parameters()) {
    if (key == "config" || key.rfind("file:", 0) == 0) {
      return FinishNow(context, grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                                             "load parameter '" + key +
                                                 "' is not supported: a load reads the model's "
                                                 "folder in the repository"));
    }
  }
  return RunRepositoryCall(context, [repository = repository_, name = std::move(name)] {
    return repository->Load(name);
  });
}

grpc::ServerUnaryReactor* InferenceService::RepositoryModelUnload(
    grpc::CallbackServerContext* context, const inference::RepositoryModelUnloadRequest* request,
    inference::RepositoryModelUnloadResponse*) {
  if (!accepting()) return FinishNow(context, ShuttingDown());
  if (const Status s = Admit(*context, gate_); !s.ok()) return FinishNow(context, ToGrpcStatus(s));
  if (repository_ == nullptr) return FinishNow(context, NoRepository());
  std::string name;
  if (grpc::Status s =
          RepositoryModelName(request->repository_name(), request->model_name(), &name);
      !s.ok()) {
    return FinishNow(context, s);
  }
  // "unload_dependents" (tritonclient always sends it) has no meaning here: no ensembles.
  return RunRepositoryCall(context, [repository = repository_, name = std::move(name)] {
    return repository->Unload(name);
  });
}

namespace {

Status SharedMemoryOff() { return Unavailable(std::string(kSharedMemoryOff)); }

}  // namespace

namespace {

void SetDuration(const metrics::InferenceStatistics::Duration& d,
                 inference::StatisticDuration* out) {
  out->set_count(d.count);
  out->set_ns(d.ns);
}

void AddStatistics(const ServedModel& model, inference::ModelStatisticsResponse* response) {
  inference::ModelStatistics* out = response->add_model_stats();
  out->set_name(model.name());
  out->set_version(model.signature().version);
  if (model.metrics() == nullptr) return;
  const metrics::InferenceStatistics::Snapshot f = model.metrics()->statistics().Read();
  out->set_last_inference(f.last_inference_ms);
  out->set_inference_count(f.inference_count);
  out->set_execution_count(f.execution_count);
  inference::InferStatistics* s = out->mutable_inference_stats();
  SetDuration(f.success, s->mutable_success());
  SetDuration(f.fail, s->mutable_fail());
  SetDuration(f.queue, s->mutable_queue());
  SetDuration(f.compute_input, s->mutable_compute_input());
  SetDuration(f.compute_infer, s->mutable_compute_infer());
  SetDuration(f.compute_output, s->mutable_compute_output());
  s->mutable_cache_hit();
  s->mutable_cache_miss();
  for (const auto& b : f.batches) {
    inference::InferBatchStatistics* batch = out->add_batch_stats();
    batch->set_batch_size(b.batch_size);
    SetDuration(b.compute_input, batch->mutable_compute_input());
    SetDuration(b.compute_infer, batch->mutable_compute_infer());
    SetDuration(b.compute_output, batch->mutable_compute_output());
  }
}

}  // namespace

grpc::ServerUnaryReactor* InferenceService::ModelStatistics(
    grpc::CallbackServerContext* context, const inference::ModelStatisticsRequest* request,
    inference::ModelStatisticsResponse* response) {
  if (request->name().empty()) {
    for (const std::shared_ptr<ServedModel>& m : models_->List()) AddStatistics(*m, response);
    return FinishNow(context, Status::Ok());
  }
  const StatusOr<std::shared_ptr<ServedModel>> model =
      FindModel(*models_, request->name(), request->version());
  if (!model.ok()) return FinishNow(context, model.status());
  AddStatistics(**model, response);
  return FinishNow(context, Status::Ok());
}

namespace {

inference::DataType ProtoDataType(const std::string& name) {
  inference::DataType type = inference::TYPE_INVALID;
  inference::DataType_Parse(name, &type);
  return type;
}

template <typename Proto>
void SetTensor(const TritonModelConfig::Tensor& t, Proto* out) {
  out->set_name(t.name);
  out->set_data_type(ProtoDataType(t.data_type));
  for (int64_t d : t.dims) out->add_dims(d);
}

}  // namespace

grpc::ServerUnaryReactor* InferenceService::ModelConfig(
    grpc::CallbackServerContext* context, const inference::ModelConfigRequest* request,
    inference::ModelConfigResponse* response) {
  const StatusOr<std::shared_ptr<ServedModel>> model =
      FindModel(*models_, request->name(), request->version());
  if (!model.ok()) return FinishNow(context, model.status());
  const ServedModel& m = **model;
  const TritonModelConfig c = TritonConfigOf(m.config(), m.signature(), m.groups());
  inference::ModelConfig* out = response->mutable_config();
  out->set_name(c.name);
  out->set_platform(c.platform);
  out->set_backend(c.backend);
  out->set_max_batch_size(c.max_batch_size);
  for (const TritonModelConfig::Tensor& t : c.input) SetTensor(t, out->add_input());
  for (const TritonModelConfig::Tensor& t : c.output) SetTensor(t, out->add_output());
  for (const TritonModelConfig::InstanceGroup& g : c.instance_group) {
    inference::ModelInstanceGroup* group = out->add_instance_group();
    group->set_name(g.name);
    group->set_count(g.count);
    group->set_kind(inference::ModelInstanceGroup::KIND_CPU);
  }
  out->set_default_model_filename(c.default_model_filename);
  inference::ModelDynamicBatching* batching = out->mutable_dynamic_batching();
  for (int32_t b : c.preferred_batch_size) batching->add_preferred_batch_size(b);
  batching->set_max_queue_delay_microseconds(c.max_queue_delay_microseconds);
  for (const auto& [key, value] : c.parameters) {
    (*out->mutable_parameters())[key].set_string_value(value);
  }
  return FinishNow(context, Status::Ok());
}

grpc::ServerUnaryReactor* InferenceService::LogSettings(
    grpc::CallbackServerContext* context, const inference::LogSettingsRequest* request,
    inference::LogSettingsResponse* response) {
  if (!request->settings().empty()) {
    if (const Status s = Admit(*context, gate_); !s.ok())
      return FinishNow(context, ToGrpcStatus(s));
    packrat::LogSettings change;
    for (const auto& [name, value] : request->settings()) {
      using Value = inference::LogSettingsRequest::SettingValue;
      switch (value.parameter_choice_case()) {
        case Value::kBoolParam:
          change.emplace_back(name, value.bool_param());
          break;
        case Value::kUint32Param:
          change.emplace_back(name, uint64_t{value.uint32_param()});
          break;
        case Value::kStringParam:
          change.emplace_back(name, value.string_param());
          break;
        default:
          return FinishNow(context, InvalidArgument("log setting '" + name + "' has no value"));
      }
    }
    if (const Status s = ApplyLogSettings(change); !s.ok()) return FinishNow(context, s);
    PACKRAT_LOG(INFO) << "log settings changed over gRPC: " << LogSettingsJson(change);
  }
  for (const auto& [name, value] : CurrentLogSettings()) {
    auto& out = (*response->mutable_settings())[name];
    if (const bool* b = std::get_if<bool>(&value)) {
      out.set_bool_param(*b);
    } else if (const uint64_t* n = std::get_if<uint64_t>(&value)) {
      out.set_uint32_param(static_cast<uint32_t>(*n));
    } else {
      out.set_string_param(std::get<std::string>(value));
    }
  }
  return FinishNow(context, Status::Ok());
}

grpc::ServerUnaryReactor* InferenceService::SystemSharedMemoryStatus(
    grpc::CallbackServerContext* context, const inference::SystemSharedMemoryStatusRequest* request,
    inference::SystemSharedMemoryStatusResponse* response) {
  if (!accepting()) return FinishNow(context, ShuttingDown());
  if (regions_ == nullptr || !regions_->enabled()) return FinishNow(context, SharedMemoryOff());
  StatusOr<std::vector<SharedMemoryRegionStatus>> regions = regions_->Regions(request->name());
  if (!regions.ok()) return FinishNow(context, regions.status());
  for (const SharedMemoryRegionStatus& r : *regions) {
    auto& out = (*response->mutable_regions())[r.name];
    out.set_name(r.name);
    out.set_key(r.key);
    out.set_offset(r.offset);
    out.set_byte_size(r.byte_size);
  }
  return FinishNow(context, Status::Ok());
}

grpc::ServerUnaryReactor* InferenceService::SystemSharedMemoryRegister(
    grpc::CallbackServerContext* context,
    const inference::SystemSharedMemoryRegisterRequest* request,
    inference::SystemSharedMemoryRegisterResponse*) {
  if (!accepting()) return FinishNow(context, ShuttingDown());
  if (regions_ == nullptr) return FinishNow(context, SharedMemoryOff());
  return FinishNow(context, regions_->Register(request->name(), request->key(), request->offset(),
                                               request->byte_size()));
}

grpc::ServerUnaryReactor* InferenceService::SystemSharedMemoryUnregister(
    grpc::CallbackServerContext* context,
    const inference::SystemSharedMemoryUnregisterRequest* request,
    inference::SystemSharedMemoryUnregisterResponse*) {
  if (!accepting()) return FinishNow(context, ShuttingDown());
  if (regions_ == nullptr || !regions_->enabled()) return FinishNow(context, SharedMemoryOff());
  return FinishNow(context, regions_->Unregister(request->name()));
}

}  // namespace packrat
