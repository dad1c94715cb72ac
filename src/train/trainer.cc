// The training loop. Hot-path rules (the playbook's "Optimizing the input pipeline" and DESIGN.md): no device→host
// copy per step — losses, gradient norms and clip flags stay on the device until a log interval; batches come from
// a background thread; evaluation runs at step intervals only.
#include "dltune/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <iterator>
#include <regex>
#include <set>

#include <fmt/format.h>
#include <torch/csrc/jit/frontend/tracer.h>
#include <torch/csrc/jit/passes/fixup_trace_scope_blocks.h>
#include <torch/csrc/jit/passes/normalize_ops.h>
#include <torch/script.h>
#include <torch/torch.h>

#include "checkpoint.h"
#include "checkpoint_state.h"
#include "core/clock.h"
#include "core/eval_schedule.h"
#include "core/files.h"
#include "core/rng.h"
#include "core/schedule.h"
#include "cuda_graph.h"
#include "data_parallel.h"
#include "device.h"
#include "dltune/core/error.h"
#include "dltune/train/workload.h"
#include "eval_batches.h"
#include "optimizer.h"
#include "pipeline.h"
#include "profile_trace.h"
#include "threads.h"
#include "training_hyperparams.h"
#include "training_rules.h"

namespace dltune {

void TrainerOptions::Validate() const {
  auto require = [](bool ok, const std::string& message) {
    if (!ok) throw Error(message);
  };
  require(max_train_steps > 0, fmt::format("max_train_steps must be > 0, not {}", max_train_steps));
  training.Validate(max_train_steps);
  require(!objective.split.empty() && !objective.metric.empty(),
          fmt::format("objective must be split/metric (e.g. valid/error_rate), not '{}'", objective.Name()));
}

namespace {

using Clock = std::chrono::steady_clock;

// Sums over an evaluation, kept on the device until the end.
struct EvalSums {
  torch::Tensor loss, correct, weight, class_correct;
};

// The sums on the host.
SplitSums OnHost(const EvalSums& sums) {
  SplitSums host{sums.loss.item<double>(), sums.correct.item<double>(), sums.weight.item<double>(), {}};
  const torch::Tensor per_class = sums.class_correct.to(torch::kCPU);
  for (std::int64_t k = 0; k < per_class.size(0); ++k) host.class_correct.push_back(per_class[k].item<double>());
  return host;
}

// A trainer's callbacks that listen to nothing (evaluating a stored checkpoint reports through its result).
class NullCallbacks final : public TrainerCallbacks {};

// `model` (in eval mode) as a TorchScript module: its parameters and buffers as attributes, its forward traced on
// `example` (a batch of inputs). Python reads it with torch.jit.load; forward(inputs) returns the logits.
void ExportTorchScript(Model& model, const torch::Tensor& example, const std::string& path) {
  torch::NoGradGuard no_grad;
  model.eval();
  torch::jit::Module exported("__torch__.dltune.ExportedModel");
  // The same tensors, registered under names TorchScript accepts: the tracer reads them as attributes of self.
  for (const auto& item : model.named_parameters()) {
    std::string name = item.key();
    std::replace(name.begin(), name.end(), '.', '_');
    exported.register_parameter(name, item.value(), /*is_buffer=*/false);
  }
  for (const auto& item : model.named_buffers()) {
    std::string name = item.key();
    std::replace(name.begin(), name.end(), '.', '_');
    exported.register_buffer(name, item.value());
  }
  for (auto& parameter : model.parameters()) parameter.set_requires_grad(false);
  auto traced = torch::jit::tracer::trace(
      {example},
      [&](torch::jit::Stack inputs) -> torch::jit::Stack { return {model.Forward(inputs.at(0).toTensor())}; },
      [](const torch::autograd::Variable&) { return std::string(); }, /*strict=*/false, /*force_outplace=*/false,
      &exported, {"inputs"});
  std::shared_ptr<torch::jit::Graph> graph = traced.first->graph;
  torch::jit::FixupTraceScopeBlocks(graph, &exported);
  torch::jit::NormalizeOps(graph);
  auto* forward = exported._ivalue()->compilation_unit()->create_function(
      c10::QualifiedName(*exported.type()->name(), "forward"), graph);
  exported.type()->addMethod(forward);
  try {
    exported.save(path);
  } catch (const c10::Error& e) {
    throw IoError(fmt::format("{}: cannot write the exported model: {}", path, e.what_without_backtrace()));
  }
}

class Loop {
 public:
  Loop(Workload& workload, const HyperParams& params, const TrainerOptions& options, TrainerCallbacks& callbacks)
      : workload_(workload),
        params_(params),
        options_(options),
        settings_(options.training.Resolved(options.max_train_steps)),
        callbacks_(callbacks),
        device_(options.device),
        on_cpu_(device_.is_cpu()) {
    if (device_.is_cuda()) MakeCudaDeterministic();
    hp_ = ReadTrainingHyperParams(params, options.max_train_steps);
    eval_every_ = settings_.eval_every_steps;
    eval_schedule_ = EvalSchedule::Parse(settings_.eval_schedule);
    log_every_ = settings_.log_every_steps;
    eval_batch_size_ =
        settings_.eval_batch_size > 0 ? settings_.eval_batch_size : DefaultEvalBatchSize(hp_.batch_size, device_);
    if (eval_batch_size_ < hp_.batch_size) {
      throw Error(fmt::format("eval_batch_size ({}) must be at least the training batch size ({})", eval_batch_size_,
                              hp_.batch_size));
    }

    if (options.distributed.world_size != settings_.processes) {
      throw Error(fmt::format("training.processes is {}, but this process is rank {} of {}", settings_.processes,
                              options.distributed.rank, options.distributed.world_size));
    }
    if (options.distributed.world_size > 1) {
      if (hp_.batch_size % options.distributed.world_size != 0) {
        throw Error(
            fmt::format("batch_size {} is not a multiple of training.processes {}: every rank trains an equal "
                        "share of each batch",
                        hp_.batch_size, options.distributed.world_size));
      }
      parallel_ = std::make_unique<DataParallel>(options.distributed, device_);
    }
    BuildModel();
    params.CheckAllParamsRead(fmt::format("workload {} with the trainer", workload.name()));
    if (!options.checkpoint_dir.empty() && rank() == 0) {
      checkpoints_ = std::make_unique<CheckpointManager>(
          CheckpointOptions{.dir = options.checkpoint_dir,
                            .keep_latest = settings_.keep_latest_checkpoints,
                            .keep_best = settings_.keep_best_checkpoints,
                            .direction = options.objective.direction,
                            .owner = options.checkpoint_owner,
                            .recorded_step_file = options.recorded_checkpoint_file});
      if (const auto& foreign = checkpoints_->Foreign(); !foreign.empty()) {
        throw Error(fmt::format("{} holds {} checkpoint{} of {}, not of this run ({}): they are neither resumed from "
                                "nor deleted; train "
                                "into another directory",
                                options.checkpoint_dir, foreign.size(), foreign.size() == 1 ? "" : "s",
                                foreign.front().owner, DescribeCheckpointOwner(options.checkpoint_owner)),
                    ErrorKind::kConflict);
      }
    }
  }

  // Restores the checkpoint in step directory `checkpoint` and evaluates `split` as an evaluation during training
  // does; `export_path`, when given, receives the model as TorchScript.
  CheckpointMetrics EvaluateSaved(const std::filesystem::path& checkpoint, const std::string& split,
                                  const std::string& export_path) {
    RestoreState(checkpoint / "state.pt");
    const WorkloadData& data = workload_.Data();
    Dataset set;
    if (split == "train") {
      set = FixedSample(data.train, std::min(settings_.train_eval_examples, data.train.size()),
                        MixSeed(options_.data_seed, 1));
    } else if (split == "valid_sample") {
      set = FixedSample(data.valid, std::min(settings_.valid_sample_examples, data.valid.size()),
                        MixSeed(options_.data_seed, 2));
    } else if (split == "valid" || split == "test") {
      set = split == "valid" ? data.valid : data.test;
    } else {
      throw Error(fmt::format("no split '{}' to evaluate; splits: train, valid, valid_sample, test", split));
    }
    if (set.size() == 0) throw Error(fmt::format("workload {} has no {} examples", workload_.name(), split));
    CheckpointMetrics result;
    result.step = step_;
    if (!ema_.empty()) SwapMovingAverage();  // the checkpoint's model is its averaged weights
    AddSplitMetrics(split, set, result.metrics);
    if (!export_path.empty()) ExportTorchScript(*model_, set.Slice(0, 1).inputs, export_path);
    return result;
  }

  std::int64_t batch_size() const { return hp_.batch_size; }
  bool on_cpu() const { return on_cpu_; }
  int rank() const { return parallel_ ? parallel_->rank() : 0; }

  TrainResult Run() {
    TrainResult result;
    Resume(result);
    PlanProfile();
    callbacks_.OnStart(step_);
    const auto data_start = Clock::now();
    const WorkloadData& data = workload_.Data();
    // On a device, the splits are moved there once: batches are gathered and evaluated there.
    train_subset_ = OnDevice(FixedSample(data.train, std::min(settings_.train_eval_examples, data.train.size()),
                                         MixSeed(options_.data_seed, 1)),
                             device_);
    if (settings_.valid_sample_examples > 0) {
      valid_sample_ = OnDevice(FixedSample(data.valid, std::min(settings_.valid_sample_examples, data.valid.size()),
                                           MixSeed(options_.data_seed, 2)),
                               device_);
    }
    valid_ = OnDevice(data.valid, device_);
    if (settings_.test_at_end) test_ = OnDevice(data.test, device_);
    prediction_set_ = valid_.Slice(0, std::min(settings_.prediction_examples, valid_.size()));
    const Dataset train = OnDevice(data.train, device_);
    seconds_["data_load"] += Seconds(Clock::now() - data_start);
    if (settings_.cuda_graph != "false") {
      // Training's own work (its step run, timed and captured), not the data's.
      const auto capture_start = Clock::now();
      CaptureStep(train);
      seconds_["train"] += Seconds(Clock::now() - capture_start);
    }
    const auto pipeline_start = Clock::now();
    // A graphed step gathers its own batch; the eager one takes it from a pipeline's background thread.
    std::unique_ptr<BatchPipeline> pipeline;
    if (!graph_) {
      PipelineOptions pipeline_options;
      if (parallel_) pipeline_options.shard = {parallel_->rank(), parallel_->world_size()};
      pipeline = std::make_unique<BatchPipeline>(train, hp_.batch_size, options_.data_seed, step_, pipeline_options);
    }
    const auto data_wait = [&] { return pipeline ? pipeline->TakeWaitSeconds() : 0.0; };
    seconds_["data_load"] += Seconds(Clock::now() - pipeline_start);

    auto interval_start = Clock::now();
    while (step_ < options_.max_train_steps) {
      profile_.StartAt(step_, device_.is_cuda());
      // The step's span holds everything its iteration does: waiting for the batch, the update, and the metrics,
      // evaluation and checkpoint that follow it.
      TraceSpan step_span(profile_.tracing(), "step", step_ + 1);
      if (graph_) {
        ReplayStep();
      } else {
        TrainStep(NextBatch(*pipeline));
      }
      ++step_;
      const bool last = step_ == options_.max_train_steps;
      const bool eval_now = last || eval_schedule_.Evaluates(step_, eval_every_, options_.max_train_steps);
      if (eval_now || step_ % log_every_ == 0) {
        const double elapsed = Seconds(Clock::now() - interval_start);
        if (auto diverged = FlushTrainMetrics(elapsed, data_wait())) {
          result.outcome = TrainOutcome::kInfeasible;
          result.reason = *diverged;
          step_span.End();
          break;
        }
      }
      if (eval_now) {
        const auto eval_start = Clock::now();
        const double checkpoint_before = seconds_["checkpoint"];
        Evaluate(last, result);
        // The checkpoint written with the evaluation counts as checkpoint time, not evaluation.
        seconds_["evaluation"] += Seconds(Clock::now() - eval_start) - (seconds_["checkpoint"] - checkpoint_before);
      }
      // The next interval's step times start after this evaluation and checkpoint, which are not steps.
      if (eval_now || step_ % log_every_ == 0) interval_start = Clock::now();
      if (!last && StopAgreed()) {
        FlushTrainMetrics(Seconds(Clock::now() - interval_start), data_wait());
        // Stopped right after an evaluation: its checkpoint is the one to resume from (saving again would replace
        // it with one without its objective, and take it out of the best pool).
        if (saved_step_ != step_) SaveCheckpoint(std::nullopt);
        result.outcome = TrainOutcome::kStopped;
        result.reason = fmt::format("stopped at step {}; resumable from its checkpoint", step_);
        step_span.End();
        break;
      }
      step_span.End();
      if (profile_.EndsAt(step_)) FinishProfile("window", result);
      ReportWrittenCheckpoint();
    }
    {
      const auto start = Clock::now();
      FinishCheckpointWrite();  // the last checkpoint is committed and reported before the run ends
      seconds_["checkpoint"] += Seconds(Clock::now() - start);
    }
    // Stopped or diverged inside the window: the trace of the steps done is written all the same.
    if (profile_.tracing() != nullptr) {
      FinishProfile(result.outcome == TrainOutcome::kStopped ? "stopped" : "diverged", result);
    }
    result.steps = step_;
    result.seconds = seconds_;
    result.threads = torch::get_num_threads();
    result.best_step = best_.step;
    result.best_value = best_.value;
    result.final_value = best_.last;
    return result;
  }

 private:
  // training.profile_steps: whether this run records a trace, and from which step. A run resumed inside the window
  // records the rest of it unless the run before wrote the trace of its part (stopped inside the window).
  void PlanProfile() {
    std::optional<ProfileWindow> window = ProfileWindow::Parse(settings_.profile_steps, options_.max_train_steps);
    if (rank() != 0) window.reset();  // one trace, of rank 0's steps
    if (!window) return;
    std::filesystem::path path = options_.profile_path;
    if (path.empty()) {
      if (options_.checkpoint_dir.empty()) {
        throw Error("training.profile_steps needs a directory for its trace: train with a checkpoint directory");
      }
      path = ProfileTracePath(options_.checkpoint_dir);
    }
    profile_.Plan(window, settings_.profile_steps, step_, path,
                  {{"workload", workload_.name()},
                   {"max_train_steps", options_.max_train_steps},
                   {"batch_size", hp_.batch_size},
                   {"device", device_.str()}});
  }

  // Writes the trace. A trace that cannot be written is a warning: training goes on (its checkpoints say whether the
  // disk is the trouble).
  void FinishProfile(const std::string& ended, TrainResult& result) {
    if (const auto written = profile_.Finish(ended)) result.profile_trace = written->string();
  }

  Batch NextBatch(BatchPipeline& pipeline) {
    TraceSpan span(profile_.tracing(), "data_wait");
    return pipeline.Next();
  }

  void TrainStep(const Batch& batch) {
    model_->train();
    TraceSpan zero_grad(profile_.tracing(), "zero_grad");
    optimizer_->ZeroGrad();
    zero_grad.End();
    TraceSpan forward(profile_.tracing(), "forward");
    const torch::Tensor inputs = batch.inputs.to(device_, /*non_blocking=*/true);
    const torch::Tensor labels = batch.labels.to(device_, /*non_blocking=*/true);
    torch::Tensor loss = TrainingLoss(model_->Forward(inputs), labels);
    forward.End();
    if (parallel_) parallel_->BeginStep(loss, stop_wish_);
    TraceSpan backward(profile_.tracing(), "backward");
    loss.backward();
    backward.End();
    if (parallel_) {
      // The gradients' mean over the ranks, and the loss of the whole global batch.
      TraceSpan all_reduce(profile_.tracing(), "all_reduce");
      const DataParallel::StepAgreement agreed = parallel_->FinishStep();
      loss = agreed.loss;
      stop_agreed_ = agreed.stop;
    }
    pending_losses_.push_back(loss.detach());
    pending_lrs_.push_back(LearningRate(hp_.schedule, step_));
    // Clipping needs the norm before the update; otherwise the update's own pass over the gradients takes it.
    if (on_cpu_) {
      std::optional<double> norm_before_clipping;
      if (hp_.grad_clip_norm > 0) norm_before_clipping = ClipGradients();
      TraceSpan update(profile_.tracing(), "optimizer");
      const double norm = optimizer_->Step(pending_lrs_.back());
      pending_norms_.push_back(norm_before_clipping.value_or(norm));
    } else {
      // On a device the norms and clip flags stay there until the log interval.
      torch::Tensor norm_before_clipping;
      if (hp_.grad_clip_norm > 0) norm_before_clipping = ClipGradientsOnDevice();
      TraceSpan update(profile_.tracing(), "optimizer");
      torch::Tensor norm = optimizer_->StepDeferred(pending_lrs_.back());
      pending_device_norms_.push_back(norm_before_clipping.defined() ? norm_before_clipping : norm);
    }
    if (!ema_.empty()) UpdateMovingAverage();
  }

  // training.cuda_graph: the step captured once in a CUDA graph (cuda_graph.h) and replayed at every step. Its inputs
  // and outputs are tensors made here, at the addresses the graph holds: the rows of the training data to gather, the
  // optimizer's coefficient table, the loss, the gradient norm and the clip flag. Where the step cannot be captured
  // (no CUDA, data-parallel ranks, a moving average, a profile, random draws), the capture fails, or (auto) a replay
  // is not faster than the eager step, the trial trains eagerly; the two launch the same kernels with the same inputs,
  // so they train alike. On stderr: why not, where the setting asked for a graph, and auto's timing on CUDA.
  void CaptureStep(const Dataset& train) {
    CaptureUnlessRefused(
        "trial", settings_.cuda_graph, device_,
        {.data_parallel = parallel_ != nullptr, .moving_average = !ema_.empty(), .profiled = profile_.planned()},
        [&](bool timed, std::optional<GraphTiming>& timing) { return CaptureOrSayWhyNot(train, timed, timing); });
  }

  // Captures the step and returns "", or returns why it was not captured (with `timed`, also where the eager step was
  // as fast; `timing` then says both). The runs of a capture (and the run that checks for random draws, and auto's
  // timed runs) train: the model, its batch-norm averages, the optimizer's state and the generators are put back as
  // they were.
  std::string CaptureOrSayWhyNot(const Dataset& train, bool timed, std::optional<GraphTiming>& timing) {
    const torch::TensorOptions on_device = torch::TensorOptions().device(device_);
    graph_batches_ =
        std::make_unique<GroupBatches>(train, hp_.batch_size, std::vector<std::uint64_t>{options_.data_seed}, step_);
    graphed_.rows = torch::zeros({1, hp_.batch_size}, on_device.dtype(torch::kInt64));
    graphed_.table = optimizer_->CoefficientTable(0.0, /*advance=*/false).to(device_);
    graphed_.loss = torch::zeros({}, on_device.dtype(torch::kFloat));
    graphed_.norm = torch::zeros({}, on_device.dtype(torch::kDouble));
    graphed_.clipped = torch::zeros({}, on_device.dtype(torch::kBool));
    std::vector<torch::Tensor> state = model_->parameters();
    for (const torch::Tensor& buffer : model_->buffers()) state.push_back(buffer);
    for (std::size_t i = 0; i < optimizer_->params().size(); ++i) {
      for (const torch::Tensor& buffer : optimizer_->Buffers(i)) state.push_back(buffer);
    }
    const KeptTensors kept(std::move(state));
    const torch::Tensor cpu_generator = GeneratorState(), cuda_generator = GeneratorState(device_);
    std::string why_not;
    try {
      GraphedStep();
      if (!torch::equal(GeneratorState(), cpu_generator) || !torch::equal(GeneratorState(device_), cuda_generator)) {
        why_not = "the step draws random numbers (dropout)";
      } else {
        CapturedStep captured = CaptureStepGraph([this] { GraphedStep(); }, timed);
        graph_ = std::move(captured.graph);
        timing = captured.timing;
        if (!graph_) why_not = "auto: " + timing->Text();
      }
    } catch (const std::exception& e) {
      why_not = FirstLine(e.what());
    }
    kept.Restore();
    SetGeneratorState(cpu_generator);
    SetGeneratorState(cuda_generator, device_);
    if (!why_not.empty()) {
      optimizer_->ZeroGrad();
      graph_batches_.reset();
    }
    return why_not;
  }

  // The step as captured: the batch of the rows in graphed_.rows, trained with graphed_.table's coefficients, its loss,
  // norm and clip flag left in graphed_. The eager step's kernels, but for the batch's gather.
  void GraphedStep() {
    model_->train();
    optimizer_->ZeroGrad();  // the capture's backward makes the gradients, which each replay then overwrites
    const Batch batch = graph_batches_->Gather(graphed_.rows);  // a group of one: [1, B, ...]
    const torch::Tensor loss = TrainingLoss(model_->Forward(batch.inputs[0]), batch.labels[0]);
    loss.backward();
    torch::Tensor norm_before_clipping;
    if (hp_.grad_clip_norm > 0) norm_before_clipping = ClipToNorm().to(torch::kDouble);
    const torch::Tensor norm = optimizer_->ApplyTable(graphed_.table);
    torch::NoGradGuard no_grad;
    graphed_.loss.copy_(loss.detach());
    graphed_.norm.copy_(norm_before_clipping.defined() ? norm_before_clipping : norm);
    if (norm_before_clipping.defined()) graphed_.clipped.copy_(norm_before_clipping > hp_.grad_clip_norm);
  }

  // One step by replaying the graph: its rows and coefficients copied in on the stream it replays on, its outputs
  // copied out before the next replay overwrites them.
  void ReplayStep() {
    graphed_.rows.copy_(graph_batches_->NextRows());
    pending_lrs_.push_back(LearningRate(hp_.schedule, step_));
    // Straight from pinned memory into the graph's table: one copy, not waited for.
    graphed_.table.copy_(optimizer_->CoefficientTable(pending_lrs_.back()).pin_memory(), /*non_blocking=*/true);
    graph_->Replay();
    pending_losses_.push_back(graphed_.loss.clone());
    pending_device_norms_.push_back(graphed_.norm.clone());
    if (hp_.grad_clip_norm > 0) pending_device_clipped_.push_back(graphed_.clipped.clone());
  }

  // The mean training loss of a batch: the workload's, or with label_smoothing the cross entropy against targets that
  // put 1 - e on the label and e / classes on every class. Evaluations keep the workload's own loss, so that runs with
  // and without smoothing compare.
  torch::Tensor TrainingLoss(const torch::Tensor& outputs, const torch::Tensor& labels) const {
    if (hp_.label_smoothing == 0) return workload_.PerExampleLoss(outputs, labels).mean();
    const torch::Tensor log_probabilities = torch::log_softmax(outputs, 1);
    const torch::Tensor on_label = -log_probabilities.gather(1, labels.unsqueeze(1)).squeeze(1);
    const torch::Tensor uniform = -log_probabilities.mean(1);
    return ((1 - hp_.label_smoothing) * on_label + hp_.label_smoothing * uniform).mean();
  }

  // Polyak averaging: after each update, ema = d ema + (1 - d) weights, with d = min(ema_decay, (1 + step) / (10 +
  // step)) so that the first steps' average is not held at the initialization.
  void UpdateMovingAverage() {
    TraceSpan span(profile_.tracing(), "ema");
    torch::NoGradGuard no_grad;
    const double decay = std::min(hp_.ema_decay, static_cast<double>(1 + step_) / static_cast<double>(10 + step_));
    const auto parameters = model_->parameters();
    for (std::size_t i = 0; i < ema_.size(); ++i) ema_[i].mul_(decay).add_(parameters[i].detach(), 1 - decay);
  }

  // Puts the averaged weights in the model (keeping the trained ones aside), or the trained ones back: what is
  // evaluated, exported and chosen as best with ema_decay is the average.
  void SwapMovingAverage() {
    torch::NoGradGuard no_grad;
    const auto parameters = model_->parameters();
    for (std::size_t i = 0; i < ema_.size(); ++i) {
      torch::Tensor trained = parameters[i].detach().clone();
      parameters[i].detach().copy_(ema_[i]);
      ema_[i] = trained;
    }
  }
  struct MovingAverageInModel {
    Loop& loop;
    explicit MovingAverageInModel(Loop& l) : loop(l) {
      if (!loop.ema_.empty()) loop.SwapMovingAverage();
    }
    ~MovingAverageInModel() {
      if (!loop.ema_.empty()) loop.SwapMovingAverage();
    }
    MovingAverageInModel(const MovingAverageInModel&) = delete;
    MovingAverageInModel& operator=(const MovingAverageInModel&) = delete;
  };

  // The global gradient norm, before the update, and the gradients scaled down to grad_clip_norm when above it.
  double ClipGradients() {
    const double value = ClipToNorm().item<double>();
    pending_clipped_.push_back(value > hp_.grad_clip_norm);
    return value;
  }
  // ClipGradients on a device: the norm (float64) and whether it clipped stay there.
  torch::Tensor ClipGradientsOnDevice() {
    const torch::Tensor norm = ClipToNorm().to(torch::kDouble);
    pending_device_clipped_.push_back(norm > hp_.grad_clip_norm);
    return norm;
  }
  // Scales the gradients down to grad_clip_norm when their global norm is above it; returns that norm.
  torch::Tensor ClipToNorm() {
    TraceSpan clip(profile_.tracing(), "grad_norm");
    // Each parameter's norm is one reduction without a temporary (pow(2).sum() writes and reads a squared copy, and
    // LibTorch's pow is not vectorized here); the global norm is the norm of those norms.
    std::vector<torch::Tensor> norms;
    for (const auto& p : model_->parameters()) {
      if (p.grad().defined()) norms.push_back(p.grad().norm());
    }
    const torch::Tensor norm = torch::stack(norms).norm();
    const torch::Tensor scale = torch::clamp(hp_.grad_clip_norm / (norm + 1e-6), c10::nullopt, 1.0);
    for (auto& p : model_->parameters()) {
      if (p.grad().defined()) p.grad().mul_(scale);
    }
    return norm;
  }

  // The device's pending norms and clip flags, read to the host beside the CPU's (one copy each per interval).
  void PullDeviceMeasurements() {
    if (!pending_device_norms_.empty()) {
      const torch::Tensor norms = torch::stack(pending_device_norms_).to(torch::kCPU, torch::kDouble);
      for (std::int64_t i = 0; i < norms.size(0); ++i) pending_norms_.push_back(norms[i].item<double>());
      pending_device_norms_.clear();
    }
    if (!pending_device_clipped_.empty()) {
      const torch::Tensor clipped = torch::stack(pending_device_clipped_).to(torch::kCPU);
      for (std::int64_t i = 0; i < clipped.size(0); ++i) pending_clipped_.push_back(clipped[i].item<bool>());
      pending_device_clipped_.clear();
    }
  }

  // Pulls the interval's training metrics to the host and reports them; returns the reason if training diverged.
  std::optional<std::string> FlushTrainMetrics(double elapsed, double data_wait) {
    seconds_["train"] += elapsed;
    seconds_["data_wait"] += data_wait;
    if (pending_losses_.empty()) return std::nullopt;
    TraceSpan span(profile_.tracing(), "metrics");
    PullDeviceMeasurements();
    const auto count = static_cast<std::int64_t>(pending_losses_.size());
    const torch::Tensor losses = torch::stack(pending_losses_).to(torch::kCPU, torch::kDouble);
    std::vector<StepMetrics> steps;
    const std::int64_t first_step = step_ - count + 1;
    for (std::int64_t i = 0; i < count; ++i) {
      StepMetrics m;
      m.step = first_step + i;
      m.loss = losses[i].item<double>();
      m.learning_rate = pending_lrs_[static_cast<std::size_t>(i)];
      m.grad_norm = pending_norms_[static_cast<std::size_t>(i)];
      if (!pending_clipped_.empty()) m.clipped = pending_clipped_[static_cast<std::size_t>(i)];
      steps.push_back(m);
    }
    ShareIntervalTime(steps, elapsed, data_wait, hp_.batch_size);
    std::optional<std::string> diverged;
    for (std::size_t i = 0; i < steps.size() && !diverged; ++i) {
      diverged = Divergence(initial_loss_, steps[i].loss, steps[i].step, settings_.divergence_factor);
      if (diverged) steps.resize(i + 1);  // nothing after the step that diverged is reported
    }
    pending_losses_.clear();
    pending_norms_.clear();
    pending_clipped_.clear();
    pending_lrs_.clear();
    callbacks_.OnTrainMetrics(steps);
    return diverged;
  }

  EvalSums Sums(const Dataset& split) {
    torch::NoGradGuard no_grad;
    model_->eval();
    const auto classes = workload_.num_classes();
    EvalSums sums{torch::zeros({}, torch::TensorOptions(device_).dtype(torch::kDouble)),
                  torch::zeros({}, torch::TensorOptions(device_).dtype(torch::kDouble)),
                  torch::zeros({}, torch::TensorOptions(device_).dtype(torch::kDouble)),
                  torch::zeros({classes}, torch::TensorOptions(device_).dtype(torch::kDouble))};
    // Data-parallel ranks take every world_size-th batch, and add their sums up below.
    const EvalBatches batches = MakeEvalBatches(split, eval_batch_size_);
    const std::int64_t first = rank(), stride = parallel_ ? parallel_->world_size() : 1;
    for (std::int64_t index = first; index < batches.size(); index += stride) {
      const EvalBatch batch = batches.Get(index);
      const torch::Tensor inputs = batch.inputs.to(device_);
      const torch::Tensor labels = batch.labels.to(device_);
      const torch::Tensor weights = batch.weights.to(device_, torch::kDouble);
      const torch::Tensor outputs = model_->Forward(inputs);
      const torch::Tensor losses = workload_.PerExampleLoss(outputs, labels).to(torch::kDouble);
      const torch::Tensor correct = (outputs.argmax(1) == labels).to(torch::kDouble) * weights;
      sums.loss += (losses * weights).sum();
      sums.correct += correct.sum();
      sums.weight += weights.sum();
      if (on_cpu_) {
        sums.class_correct.scatter_add_(0, labels, correct);
      } else {
        // A sum over the batch, the same on every run (whole numbers in double: exact in any order).
        sums.class_correct += (torch::one_hot(labels, classes).to(torch::kDouble) * correct.unsqueeze(1)).sum(0);
      }
    }
    if (parallel_) {
      torch::Tensor packed =
          torch::cat({sums.loss.view({1}), sums.correct.view({1}), sums.weight.view({1}), sums.class_correct});
      parallel_->SumInPlace(packed);
      sums = {packed[0], packed[1], packed[2], packed.slice(0, 3)};
    }
    return sums;
  }

  void AddSplitMetrics(const std::string& name, const Dataset& split, std::vector<EvalMetric>& metrics) {
    if (split.size() == 0) return;
    AddMetricsFromSums(name, OnHost(Sums(split)), metrics);
  }

  // The split an evaluation names (SplitsToEvaluate), as this run holds it.
  const Dataset& SplitNamed(const std::string& name) const {
    if (name == "train") return train_subset_;
    if (name == "valid_sample") return valid_sample_;
    return name == "valid" ? valid_ : test_;
  }

  void Evaluate(bool last, TrainResult& result) {
    TraceSpan span(profile_.tracing(), "evaluation");
    SynchronizeBuffers();
    std::vector<EvalMetric> metrics;
    {
      const MovingAverageInModel averaged(*this);
      for (const std::string& split : SplitsToEvaluate(settings_, last))
        AddSplitMetrics(split, SplitNamed(split), metrics);
      ReportPredictions();
    }
    const std::optional<double> objective = ObjectiveValue(options_.objective, metrics);
    best_.Record(step_, objective, options_.objective.direction);
    callbacks_.OnEvaluation(step_, metrics, best_.step.value_or(0), best_.value.value_or(std::nan("")));
    span.End();  // the checkpoint is a span of its own, as it is a phase of its own in the time split
    SaveCheckpoint(objective);
    (void)result;
  }

  void ReportPredictions() {
    if (prediction_set_.size() == 0 || rank() != 0) return;
    torch::NoGradGuard no_grad;
    model_->eval();
    const torch::Tensor probabilities = torch::softmax(model_->Forward(prediction_set_.inputs.to(device_)), 1);
    const auto [confidence, predicted] = probabilities.max(1);
    const torch::Tensor confidence_cpu = confidence.to(torch::kCPU, torch::kDouble);
    const torch::Tensor predicted_cpu = predicted.to(torch::kCPU);
    const torch::Tensor labels = prediction_set_.labels.to(torch::kCPU);
    std::vector<Prediction> predictions;
    for (std::int64_t i = 0; i < prediction_set_.size(); ++i) {
      predictions.push_back(
          {i, labels[i].item<std::int64_t>(), predicted_cpu[i].item<std::int64_t>(), confidence_cpu[i].item<double>()});
    }
    callbacks_.OnPredictions(step_, predictions);
  }

  // Serializes the state here, then writes, checksums and fsyncs it on a thread of its own while training goes on
  // (a checkpoint's disk time does not stall the steps). One write at a time: a save waits for the one before.
  // Its report (OnCheckpoint) is sent from this thread once it is committed: at a later step, or at the end.
  void SaveCheckpoint(std::optional<double> objective) {
    if (options_.checkpoint_dir.empty()) return;
    TraceSpan span(profile_.tracing(), "checkpoint");
    const auto start = Clock::now();
    // Counted however it returns.
    struct AddOnExit {
      double& total;
      std::chrono::steady_clock::time_point start;
      ~AddOnExit() { total += Seconds(std::chrono::steady_clock::now() - start); }
    } add{seconds_["checkpoint"], start};
    torch::Tensor rank_generators, rank_cuda_generators;
    if (parallel_) {
      // Every rank takes part; rank 0 writes the one checkpoint, with every rank's dropout generator.
      SynchronizeBuffers();
      rank_generators = parallel_->AllGather(GeneratorState());
      if (device_.is_cuda()) rank_cuda_generators = parallel_->AllGather(GeneratorState(device_));
      if (rank() != 0) {
        saved_step_ = step_;
        return;
      }
    }
    FinishCheckpointWrite();
    saved_step_ = step_;
    // The bytes, taken now: the model's tensors change with the next step.
    std::string bytes = WriteTrainingState(
        *model_, [&](torch::serialize::OutputArchive& archive) { optimizer_->Save(archive); },
        {step_, best_.step, best_.value, initial_loss_, GeneratorState()},
        static_cast<std::int64_t>(torch::get_num_threads()),
        [&](torch::serialize::OutputArchive& archive) {
          // Dropout on CUDA draws from the device's generator: kept, so that a resume on CUDA continues its stream.
          if (device_.is_cuda()) archive.write("cuda_generator", GeneratorState(device_));
          for (std::size_t i = 0; i < ema_.size(); ++i) archive.write(fmt::format("ema_{}", i), ema_[i]);
          if (rank_generators.defined()) archive.write("cpu_generator_ranks", rank_generators);
          if (rank_cuda_generators.defined()) archive.write("cuda_generator_ranks", rank_cuda_generators);
        });
    checkpoint_write_ = SaveStateInBackground(*checkpoints_, step_, objective, std::move(bytes));
  }

  // Waits for the checkpoint being written, if any, and reports it; rethrows the error it failed with.
  void FinishCheckpointWrite() {
    if (!checkpoint_write_.valid()) return;
    for (const CheckpointEvent& event : CheckpointEvents(checkpoint_write_.get())) callbacks_.OnCheckpoint(event);
  }

  // Reports a checkpoint whose write has finished, without waiting for one that has not.
  void ReportWrittenCheckpoint() {
    if (checkpoint_write_.valid() && checkpoint_write_.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      FinishCheckpointWrite();
    }
  }

  // The model and its optimizer as initialized from the init seed; then the global generator is seeded for dropout.
  void BuildModel() {
    torch::manual_seed(options_.init_seed);  // the init seed: identical models on every host
    model_ = workload_.BuildModel(params_);
    model_->to(device_);
    optimizer_ = std::make_unique<Optimizer>(model_->parameters(), hp_.optimizer);
    if (parallel_) parallel_->Attach(model_->parameters());
    ema_.clear();
    if (hp_.ema_decay > 0) {
      for (const auto& parameter : model_->parameters()) ema_.push_back(parameter.detach().clone());
    }
    // From here on the global generator drives dropout: seed it from the data seed, which differs across hosts.
    torch::manual_seed(DropoutSeed());
  }

  // The dropout generator's seed: the data seed's, and a stream of its own for each data-parallel rank but 0.
  std::uint64_t DropoutSeed() const {
    const std::uint64_t seed = MixSeed(options_.data_seed, kDropoutStream);
    return rank() == 0 ? seed : MixSeed(seed, static_cast<std::uint64_t>(rank()));
  }

  static torch::Tensor GeneratorState(const torch::Device& device = torch::kCPU) {
    auto generator = at::globalContext().defaultGenerator(device);
    const std::lock_guard<std::mutex> lock(generator.mutex());
    return generator.get_state();
  }
  static void SetGeneratorState(const torch::Tensor& state, const torch::Device& device = torch::kCPU) {
    auto generator = at::globalContext().defaultGenerator(device);
    const std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(state);
  }
  // Data-parallel: gives every rank the mean of the ranks' batch-norm running averages (the playbook's multi-host
  // rule: synchronize them before evaluating or checkpointing), once per step.
  void SynchronizeBuffers() {
    if (!parallel_ || buffers_synchronized_step_ == step_) return;
    parallel_->AverageBuffers(model_->buffers());
    buffers_synchronized_step_ = step_;
  }

  // Whether training stops after this step. Alone: when the callbacks say so. Data-parallel: when any rank wished to
  // after the step before (this step's all-reduce carried the wishes), so that every rank stops at the same step; this
  // rank's wish is asked now, for the next step.
  bool StopAgreed() {
    if (!parallel_) return callbacks_.ShouldStop(step_);
    stop_wish_ = callbacks_.ShouldStop(step_) || stop_wish_;
    return stop_agreed_;
  }

  // Restores the newest checkpoint (at or before max_resume_step) that verifies and that LibTorch can read; a newer
  // one that fails either way is skipped with a warning, as a corrupt one is (docs/checkpoint-layout.md, Recovery).
  void Resume(TrainResult& result) {
    if (parallel_) {
      // Rank 0 chooses and reads the checkpoint; every other rank restores the bytes it sends.
      if (options_.checkpoint_dir.empty()) return;
      std::string state;
      if (rank() == 0) state = ResumeFromNewest(result);
      parallel_->Broadcast(state);
      if (state.empty()) return;
      if (rank() != 0) RestoreStateFrom(state);
      result.resumed_from_step = step_;
      return;
    }
    ResumeFromNewest(result);
  }

  // Resumes from the newest usable checkpoint, and returns its state's bytes ("" when it starts afresh).
  std::string ResumeFromNewest(TrainResult& result) {
    if (!checkpoints_) return "";
    const auto all = checkpoints_->List();
    for (auto it = all.rbegin(); it != all.rend(); ++it) {
      if (options_.max_resume_step >= 0 && it->step > options_.max_resume_step) continue;
      try {
        const LoadedCheckpoint loaded = checkpoints_->Load(it->step);
        std::string state = ReadWholeFile(loaded.info.path / "state.pt");
        RestoreStateFrom(state);
        result.resumed_from_step = step_;
        return state;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "dltune: warning: skipping the checkpoint of step %lld: %s\n",
                     static_cast<long long>(it->step), FirstLine(e.what()).c_str());
        // A half-read checkpoint may have changed the model: start again from the initialization.
        step_ = 0;
        best_ = {};
        initial_loss_.reset();
        BuildModel();
      }
    }
    return "";
  }

  static std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

  void RestoreState(const std::filesystem::path& file) { RestoreStateFrom(ReadWholeFile(file)); }

  void RestoreStateFrom(const std::string& state) {
    torch::serialize::InputArchive archive;
    const TrainingProgress progress = ReadTrainingState(
        state, device_, *model_, [&](torch::serialize::InputArchive& saved) { optimizer_->Load(saved); }, archive);
    step_ = progress.step;
    best_.step = progress.best_step;
    best_.value = progress.best_value;
    initial_loss_ = progress.initial_loss;
    SetGeneratorState(progress.cpu_generator);
    // A checkpoint written on the CPU has no CUDA stream: CUDA's dropout then goes on from its seed.
    if (torch::Tensor cuda_state; device_.is_cuda() && archive.try_read("cuda_generator", cuda_state)) {
      SetGeneratorState(cuda_state.to(torch::kCPU), device_);
    }
    for (std::size_t i = 0; i < ema_.size(); ++i) {
      torch::Tensor average;
      if (!archive.try_read(fmt::format("ema_{}", i), average)) {
        throw Error("the checkpoint holds no moving average of the weights (ema_decay): it was written without one");
      }
      ema_[i] = average.to(device_);
    }
    if (torch::Tensor threads; options_.training.threads == 0 && archive.try_read("threads", threads)) {
      torch::set_num_threads(static_cast<int>(threads.item<std::int64_t>()));
    }
    if (parallel_) {
      // Each rank's own generator when the checkpoint was written by as many ranks; else a rank's stream restarts
      // from its seed and the step (rank 0 continues rank 0's).
      torch::Tensor ranks;
      if (archive.try_read("cpu_generator_ranks", ranks) && ranks.size(0) == parallel_->world_size()) {
        SetGeneratorState(ranks[rank()].to(torch::kCPU).contiguous());
      } else if (rank() != 0) {
        torch::manual_seed(MixSeed(DropoutSeed(), static_cast<std::uint64_t>(step_)));
      }
      // Ranks on CUDA draw their dropout there: each its own stream, as on the CPU.
      if (torch::Tensor cuda_ranks; device_.is_cuda() && archive.try_read("cuda_generator_ranks", cuda_ranks) &&
                                    cuda_ranks.size(0) == parallel_->world_size()) {
        SetGeneratorState(cuda_ranks[rank()].to(torch::kCPU).contiguous(), device_);
      }
    }
  }

  Workload& workload_;
  const HyperParams& params_;
  const TrainerOptions& options_;
  const TrainingSettings settings_;  // options_.training with the derived intervals filled in
  TrainerCallbacks& callbacks_;
  torch::Device device_;
  bool on_cpu_ = true;  // device_ is the CPU: the fused update, host-side norms, the CPU's fast gathers
  TrainingHyperParams hp_;
  std::int64_t eval_every_ = 1;
  std::map<std::string, double> seconds_;  // TrainResult::seconds
  EvalSchedule eval_schedule_;
  std::int64_t log_every_ = 1;
  std::int64_t eval_batch_size_ = 1;
  std::shared_ptr<Model> model_;
  std::unique_ptr<Optimizer> optimizer_;
  // With ema_decay: the moving average of each of the model's parameters (in its order); while an evaluation runs,
  // the trained weights, the average being in the model.
  std::vector<torch::Tensor> ema_;
  std::unique_ptr<DataParallel> parallel_;  // data-parallel training; null when this process trains alone
  bool stop_wish_ = false;                  // this rank asked to stop (data-parallel), told the others next step
  bool stop_agreed_ = false;                // some rank asked to stop: every rank stops after this step
  std::int64_t buffers_synchronized_step_ = -1;
  std::unique_ptr<CheckpointManager> checkpoints_;
  std::future<SavedCheckpoint> checkpoint_write_;  // after checkpoints_: destroyed (waited for) before it
  Dataset train_subset_;
  Dataset valid_sample_;
  Dataset prediction_set_;
  Dataset valid_, test_;                         // on device_ (test_ only when it is evaluated)
  std::unique_ptr<StepGraph> graph_;             // training.cuda_graph, captured; null: eager
  std::unique_ptr<GroupBatches> graph_batches_;  // the graphed step's rows
  struct {
    torch::Tensor rows, table, loss, norm, clipped;
  } graphed_;  // the captured step's inputs and outputs
  std::int64_t step_ = 0;
  std::int64_t saved_step_ = -1;  // the step of the last checkpoint saved
  std::optional<double> initial_loss_;
  BestObjective best_;       // retrospective selection
  ProfileRecorder profile_;  // training.profile_steps
  std::vector<torch::Tensor> pending_losses_;
  std::vector<double> pending_norms_;
  std::vector<bool> pending_clipped_;
  std::vector<double> pending_lrs_;
  // On a device: the norms (float64) and clip flags of the steps since the last log, not yet read to the host.
  std::vector<torch::Tensor> pending_device_norms_;
  std::vector<torch::Tensor> pending_device_clipped_;
};

}  // namespace

TrainResult TrainWorkload(Workload& workload, const HyperParams& params, const TrainerOptions& options,
                          TrainerCallbacks& callbacks) {
  options.Validate();
  SetTorchThreads(options.training.threads);
  Loop loop(workload, params, options, callbacks);
  // Running out of memory is a result of the batch size (the throughput sweep stops there), not a crash.
  const auto out_of_memory = [&](const std::string& what) {
    TrainResult result;
    result.outcome = TrainOutcome::kInfeasible;
    result.reason = fmt::format("out of {}memory at batch size {}: {}", loop.on_cpu() ? "" : "GPU ", loop.batch_size(),
                                what.substr(0, what.find('\n')));
    return result;
  };
  TrainResult result;
  try {
    result = loop.Run();
  } catch (const std::bad_alloc& e) {
    result = out_of_memory(e.what());
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    if (what.find("out of memory") == std::string::npos && what.find("can't allocate memory") == std::string::npos) {
      throw;
    }
    result = out_of_memory(what);
  }
  callbacks.OnEnd(result);
  return result;
}

CheckpointMetrics EvaluateCheckpoint(Workload& workload, const HyperParams& params, const TrainerOptions& options,
                                     const std::string& checkpoint_path, const std::string& split,
                                     const std::string& export_path) {
  TrainerOptions evaluation = options;
  evaluation.checkpoint_dir.clear();  // read the one checkpoint named; manage none
  evaluation.Validate();
  SetTorchThreads(options.training.threads);
  NullCallbacks callbacks;
  Loop loop(workload, params, evaluation, callbacks);
  return loop.EvaluateSaved(checkpoint_path, split, export_path);
}

namespace {

// Why building the model failed, for a person: out of memory names the model's settings and the bytes it asked for.
Error ModelBuildError(const Workload& workload, const HyperParams& params, const std::set<std::string>& model_settings,
                      const std::string& what) {
  std::smatch bytes;
  const bool out_of_memory = what.find("can't allocate memory") != std::string::npos ||
                             what.find("out of memory") != std::string::npos || what == std::bad_alloc().what();
  if (!out_of_memory) {
    return Error(
        fmt::format("workload {} cannot build its model: {}", workload.name(), what.substr(0, what.find('\n'))));
  }
  std::string settings;
  for (const std::string& name : model_settings) {
    if (params.Has(name))
      settings += fmt::format("{}{}: {}", settings.empty() ? "" : ", ", name, params.ValueText(name));
  }
  const std::string asked = std::regex_search(what, bytes, std::regex("allocate (\\d+) bytes"))
                                ? fmt::format(" (it asked for {} bytes at once)", bytes[1].str())
                                : "";
  return Error(fmt::format("workload {}: the model does not fit in this machine's memory{}; make it smaller{}",
                           workload.name(), asked, settings.empty() ? "" : " (" + settings + ")"));
}

// The names in `after` and not in `before`.
std::set<std::string> ReadSince(const std::set<std::string>& before, const std::set<std::string>& after) {
  std::set<std::string> added;
  std::set_difference(after.begin(), after.end(), before.begin(), before.end(), std::inserter(added, added.end()));
  return added;
}

}  // namespace

void CheckTrialParams(Workload& workload, const HyperParams& params, std::int64_t max_train_steps) {
  ReadTrainingHyperParams(params, max_train_steps);
  const std::set<std::string> before = params.read_names();
  try {
    workload.BuildModel(params);
  } catch (const std::bad_alloc& e) {
    throw ModelBuildError(workload, params, ReadSince(before, params.read_names()), e.what());
  } catch (const c10::Error& e) {
    throw ModelBuildError(workload, params, ReadSince(before, params.read_names()), e.what_without_backtrace());
  }
  params.CheckAllParamsRead(fmt::format("workload {} with the trainer", workload.name()));
  params.CheckAllArgumentsRead(fmt::format("workload {} (workload.args)", workload.name()), workload.ArgumentNames());
}

}  // namespace dltune
