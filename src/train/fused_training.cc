#include "fused_training.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <torch/torch.h>

#include "array_optimizer.h"
#include "checkpoint.h"
#include "checkpoint_state.h"
#include "core/clock.h"
#include "core/eval_schedule.h"
#include "core/files.h"
#include "core/rng.h"
#include "core/schedule.h"
#include "cuda_graph.h"
#include "device.h"
#include "dltune/core/error.h"
#include "eval_batches.h"
#include "make_array_model.h"
#include "pipeline.h"
#include "profile_trace.h"
#include "threads.h"
#include "training_hyperparams.h"
#include "training_rules.h"

namespace dltune {
namespace {

using Clock = std::chrono::steady_clock;

// A member while it trains.
struct MemberState {
  const FusedMember* spec = nullptr;
  TrainingHyperParams hp;
  std::shared_ptr<Model> lone;  // its lone model: initial weights, and the shape of its checkpoints
  std::unique_ptr<CheckpointManager> checkpoints;
  // Its checkpoint being written off the training thread (after `checkpoints`: a write ends before its manager).
  std::future<SavedCheckpoint> checkpoint_write;
  std::optional<double> initial_loss;
  BestObjective best;              // retrospective selection
  bool active = true;              // false once diverged: masked out of the updates
  std::int64_t saved_step = -1;    // the step of its last checkpoint
  std::size_t steps_reported = 0;  // out.steps given to the callbacks so far
  bool ended = false;              // its end given to the callbacks
  FusedMemberResult out;
};

// An evaluated split: one all members take (a split, or a sample of all of it), or each member's own examples,
// interleaved (InterleavedFixedSamples).
struct EvalSplit {
  Dataset data;
  bool shared = true;
};

// Throws Error for what a lone trial does and a member does not.
void CheckFusable(const MemberState& member, std::size_t index) {
  const auto refuse = [&](const std::string& what) {
    throw Error(fmt::format("fused trials: member {} asks for {}, which fused trials do not do", index, what));
  };
  if (member.hp.grad_clip_norm > 0) refuse("gradient clipping (grad_clip_norm)");
  if (member.hp.label_smoothing > 0) refuse("label smoothing");
  if (member.hp.ema_decay > 0) refuse("a moving average of the weights (ema_decay)");
}

void CheckOptions(const FusedOptions& options, std::size_t members) {
  if (members == 0) throw Error("fused trials: no members");
  if (options.max_train_steps <= 0) {
    throw Error(fmt::format("max_train_steps must be > 0, not {}", options.max_train_steps));
  }
  options.training.Validate(options.max_train_steps);
  if (options.stop_after_step < 0 || options.stop_after_step > options.max_train_steps) {
    throw Error(
        fmt::format("fused trials: stop_after_step {} is not in [0, max_train_steps]", options.stop_after_step));
  }
  if (options.training.processes != 1) throw Error("fused trials train in one process (training.processes: 1)");
  if (options.objective.split.empty() || options.objective.metric.empty()) {
    throw Error(
        fmt::format("objective must be split/metric (e.g. valid/error_rate), not '{}'", options.objective.Name()));
  }
}

class FusedLoop {
 public:
  FusedLoop(Workload& workload, const std::vector<FusedMember>& members, const FusedOptions& options)
      : workload_(workload),
        options_(options),
        settings_(options.training.Resolved(options.max_train_steps)),
        device_(options.device),
        deferred_(options.deferred || !device_.is_cpu()) {
    if (device_.is_cuda()) MakeCudaDeterministic();
    eval_schedule_ = EvalSchedule::Parse(settings_.eval_schedule);
    for (std::size_t m = 0; m < members.size(); ++m) members_.push_back(BuildMember(members[m], m));
    batch_size_ = members_.front().hp.batch_size;
    std::vector<std::shared_ptr<Model>> lone_models;
    std::vector<OptimizerOptions> optimizers;
    for (const MemberState& member : members_) {
      if (member.hp.batch_size != batch_size_) {
        throw Error(fmt::format("fused trials: members train with one batch size, not {} and {}", batch_size_,
                                member.hp.batch_size));
      }
      lone_models.push_back(member.lone);
      optimizers.push_back(member.hp.optimizer);
    }
    model_ = MakeArrayModel(workload_, lone_models, device_);
    for (std::size_t m = 0; m < members_.size(); ++m) {
      // As the lone trainer seeds torch's generator for dropout once its model is built.
      model_->DropoutGenerator(static_cast<std::int64_t>(m))
          .set_current_seed(MixSeed(members_[m].spec->data_seed, kDropoutStream));
    }
    optimizer_ = std::make_unique<ArrayOptimizer>(
        model_->ArrayParameters(), optimizers, deferred_ ? ArrayOptimizer::Form::kTensor : ArrayOptimizer::Form::kAuto);
    eval_batch_size_ =
        settings_.eval_batch_size > 0 ? settings_.eval_batch_size : DefaultEvalBatchSize(batch_size_, device_);
    if (eval_batch_size_ < batch_size_) {
      throw Error(fmt::format("eval_batch_size ({}) must be at least the training batch size ({})", eval_batch_size_,
                              batch_size_));
    }
  }

  std::vector<FusedMemberResult> Run() {
    // As the lone trainer: resumed, started (the time before is the members' start-up), then the data loaded.
    Resume();
    if (callbacks_) {
      for (const MemberState& member : members_) callbacks_->OnStart(Index(member), step_);
    }
    const Clock::time_point began = Clock::now();
    const WorkloadData& data = workload_.Data();
    // On a device the splits are moved there once, as the lone trainer moves them: batches are gathered there.
    const Dataset train = OnDevice(data.train, device_);
    valid_ = {OnDevice(data.valid, device_), /*shared=*/true};
    if (settings_.test_at_end) test_ = {OnDevice(data.test, device_), /*shared=*/true};
    // Each member's fixed samples, gathered where the splits are (on a device, not copied there member by member).
    train_subset_ = FixedSamples(train, settings_.train_eval_examples, 1);
    if (settings_.valid_sample_examples > 0) {
      valid_sample_ = FixedSamples(valid_.data, settings_.valid_sample_examples, 2);
    }
    // The members' batches, gathered together: each member's rows in its lone trial's order, one gather a step.
    std::vector<std::uint64_t> seeds;
    for (const MemberState& member : members_) seeds.push_back(member.spec->data_seed);
    group_batches_ = std::make_unique<GroupBatches>(train, batch_size_, seeds, step_);
    seconds_["data_load"] = Seconds(Clock::now() - began);
    PlanProfile();
    if (deferred_ && settings_.cuda_graph != "false") CaptureStep();
    interval_start_ = Clock::now();
    const std::int64_t end = options_.stop_after_step > 0 ? options_.stop_after_step : options_.max_train_steps;
    while (step_ < end && AnyActive()) {
      profile_.StartAt(step_, device_.is_cuda());
      // As the lone trainer's: the step's span holds its update and the reads, evaluation and checkpoints after it.
      TraceSpan step_span(profile_.tracing(), "step", step_ + 1);
      TrainStep();
      ++step_;
      const bool last = step_ == options_.max_train_steps;
      const bool evaluate =
          last || eval_schedule_.Evaluates(step_, settings_.eval_every_steps, options_.max_train_steps);
      const bool read = !deferred_ || evaluate || step_ % settings_.log_every_steps == 0;
      if (read) ReadPendingSteps();
      if (evaluate) Evaluate(last);
      // The next interval's step times start after this read and evaluation, which are not steps.
      if (read) interval_start_ = Clock::now();
      step_span.End();
      if (profile_.EndsAt(step_)) FinishProfile("window");
      if (callbacks_ && callbacks_->ShouldStop(step_)) break;
    }
    ReadPendingSteps();
    // Stopped or every member diverged inside the window: the trace of the steps done is written all the same.
    if (profile_.tracing() != nullptr) FinishProfile(AnyActive() ? "stopped" : "diverged");
    std::vector<FusedMemberResult> results;
    for (MemberState& member : members_) results.push_back(Finish(member));
    for (std::size_t m = 0; m < results.size(); ++m) results[m].result.profile_trace = ProfileOf(m);
    // The group's time split, as a lone trial's: the steps (the capture of a graph with them) are the rest.
    double accounted = 0;
    for (const auto& [phase, seconds] : seconds_) accounted += phase == "data_wait" ? 0 : seconds;  // part of train
    seconds_["train"] = std::max(0.0, Seconds(Clock::now() - began) - accounted);
    for (FusedMemberResult& result : results) result.result.seconds = seconds_;
    return results;
  }

 private:
  MemberState BuildMember(const FusedMember& spec, std::size_t index) {
    MemberState member;
    member.spec = &spec;
    member.hp = ReadTrainingHyperParams(spec.params, options_.max_train_steps);
    CheckFusable(member, index);
    torch::manual_seed(spec.init_seed);  // as the lone trainer builds the model
    member.lone = workload_.BuildModel(spec.params);
    spec.params.CheckAllParamsRead(fmt::format("workload {} with the trainer", workload_.name()));
    if (!spec.checkpoint_dir.empty()) {
      member.checkpoints =
          std::make_unique<CheckpointManager>(CheckpointOptions{.dir = spec.checkpoint_dir,
                                                                .keep_latest = settings_.keep_latest_checkpoints,
                                                                .keep_best = settings_.keep_best_checkpoints,
                                                                .direction = options_.objective.direction,
                                                                .owner = spec.checkpoint_owner});
      if (!member.checkpoints->Foreign().empty()) {
        throw Error(fmt::format("{} holds checkpoints of another run: they are neither resumed from nor deleted",
                                spec.checkpoint_dir),
                    ErrorKind::kConflict);
      }
    }
    return member;
  }

  // A group whose members hold checkpoints resumes from the newest step at which every member has one (members
  // stopped together share their steps). A group some of whose members hold checkpoints and others none, or whose
  // members share no step, does not resume (Error): its members resume alone.
  void Resume() {
    std::vector<std::set<std::int64_t>> steps;
    for (const MemberState& member : members_) {
      std::set<std::int64_t> own;
      if (member.checkpoints) {
        for (const CheckpointInfo& info : member.checkpoints->List()) {
          // One written after the last measurements its worker recorded would leave a gap in its series.
          if (member.spec->max_resume_step < 0 || info.step <= member.spec->max_resume_step) own.insert(info.step);
        }
      }
      steps.push_back(std::move(own));
    }
    std::set<std::int64_t> common = steps.front();
    for (std::size_t m = 0; m < members_.size(); ++m) {
      if (steps[m].empty() != steps.front().empty()) {
        throw Error(fmt::format("fused trials resume together: member {} holds {}checkpoints and member {} {}", 0,
                                steps.front().empty() ? "no " : "", m, steps[m].empty() ? "none" : "some"),
                    ErrorKind::kConflict);
      }
      std::set<std::int64_t> both;
      std::set_intersection(common.begin(), common.end(), steps[m].begin(), steps[m].end(),
                            std::inserter(both, both.end()));
      common = std::move(both);
    }
    if (steps.front().empty()) return;
    if (common.empty()) {
      throw Error("fused trials resume together from one step, and these members' checkpoints share none",
                  ErrorKind::kConflict);
    }
    const std::int64_t step = *common.rbegin();
    for (MemberState& member : members_) {
      const LoadedCheckpoint loaded = member.checkpoints->Load(step);
      RestoreMember(member, ReadWholeFile(loaded.info.path / "state.pt"));
      member.out.result.resumed_from_step = step;
    }
    step_ = step;
  }

  // Restores a member from its checkpoint's state (as the lone trainer's RestoreStateFrom does).
  void RestoreMember(MemberState& member, const std::string& state) {
    const auto m = static_cast<std::int64_t>(Index(member));
    torch::serialize::InputArchive archive;
    const TrainingProgress progress = ReadTrainingState(
        state, c10::nullopt, *member.lone,
        [&](torch::serialize::InputArchive& saved) { optimizer_->LoadMember(m, saved); }, archive);
    model_->CopyMemberFrom(m, *member.lone);
    member.saved_step = progress.step;
    member.best.step = progress.best_step;
    member.best.value = progress.best_value;
    member.initial_loss = progress.initial_loss;
    model_->DropoutGenerator(m).set_state(progress.cpu_generator);
  }

  // training.profile_steps: the group's trace, as a lone trial's (trainer.cc, PlanProfile): the steps' operators are
  // every member's, so it is written once, beside the first member's checkpoints, and each other member's directory
  // links to it. A group resumed inside the window records the rest of it unless the run before wrote its part.
  void PlanProfile() {
    const std::optional<ProfileWindow> window = ProfileWindow::Parse(settings_.profile_steps, options_.max_train_steps);
    if (!window) return;
    const std::string& first_dir = members_.front().spec->checkpoint_dir;
    if (first_dir.empty()) {
      throw Error("training.profile_steps needs a directory for its trace: train with a checkpoint directory");
    }
    profile_.Plan(window, settings_.profile_steps, step_, ProfileTracePath(first_dir),
                  {{"workload", workload_.name()},
                   {"max_train_steps", options_.max_train_steps},
                   {"batch_size", batch_size_},
                   {"device", device_.str()},
                   {"fused_members", count()}});
  }

  // Writes the trace and links each other member's trace path to it. A trace that cannot be written is a warning:
  // training goes on.
  void FinishProfile(const std::string& ended) {
    const auto written = profile_.Finish(ended);
    if (!written) return;
    profile_written_ = *written;
    for (std::size_t m = 1; m < members_.size(); ++m) {
      if (members_[m].spec->checkpoint_dir.empty()) continue;
      const std::filesystem::path link = ProfileTracePath(members_[m].spec->checkpoint_dir);
      if (link.lexically_normal() == profile_written_.lexically_normal()) continue;  // a directory they share
      std::error_code error;
      std::filesystem::remove(link, error);  // a link of an earlier attempt's group
      std::filesystem::create_directories(link.parent_path(), error);
      std::filesystem::create_symlink(std::filesystem::relative(profile_written_, link.parent_path(), error), link,
                                      error);
      if (error) {
        std::fprintf(stderr, "dltune: warning: %s: no link to the group's profile trace: %s\n", link.c_str(),
                     error.message().c_str());
      }
    }
  }

  // Member m's trace path, once the group's trace is written: the first member's file, the others' links.
  std::string ProfileOf(std::size_t m) const {
    const std::string& dir = members_[m].spec->checkpoint_dir;
    return profile_written_.empty() || dir.empty() ? "" : ProfileTracePath(dir).string();
  }

  bool AnyActive() const {
    for (const MemberState& member : members_) {
      if (member.active) return true;
    }
    return false;
  }
  std::int64_t count() const { return static_cast<std::int64_t>(members_.size()); }

  // One update of every active member: each its own batch, one forward and backward of the array model, one pass
  // of the array optimizer.
  void TrainStep() {
    std::vector<double> learning_rates;
    std::vector<bool> active;
    for (MemberState& member : members_) {
      learning_rates.push_back(LearningRate(member.hp.schedule, step_));
      active.push_back(member.active);
    }
    if (graph_) {
      // Into the captured step's inputs, on the stream it replays on: the rows to gather and the coefficients.
      graphed_.rows.copy_(group_batches_->NextRows());
      // Straight from pinned memory into the graph's table: one copy, not waited for.
      graphed_.table.copy_(optimizer_->CoefficientTable(learning_rates, active).pin_memory(), /*non_blocking=*/true);
      graph_->Replay();
      pending_.push_back({graphed_.losses.clone(), graphed_.norms.clone(), learning_rates});
      return;
    }
    model_->train();
    optimizer_->ZeroGrad();
    // The spans of a profile window, as the lone trainer's.
    std::optional<TraceSpan> span;
    span.emplace(profile_.tracing(), "data");
    const Clock::time_point gather_start = Clock::now();
    const Batch batch = group_batches_->Next();
    data_wait_ += Seconds(Clock::now() - gather_start);  // the training thread gathers its input itself
    span.emplace(profile_.tracing(), "forward");
    const torch::Tensor logits = model_->ForwardStacked(batch.inputs);
    // Each member's mean loss; their sum's gradient is each member's own, as the members share no weight.
    const torch::Tensor losses =
        workload_.PerExampleLoss(logits.flatten(0, 1), batch.labels.flatten()).view({count(), batch_size_}).mean(1);
    span.emplace(profile_.tracing(), "backward");
    losses.sum().backward();
    span.emplace(profile_.tracing(), "optimizer");
    pending_.push_back({losses.detach(), optimizer_->StepDeferred(learning_rates, active), learning_rates});
  }

  // training.cuda_graph: the step of a group training on CUDA without dropout captured once in a CUDA graph, replayed
  // at each step. Its inputs and outputs are tensors made here, at the addresses the graph holds: the rows of the
  // training data to gather, the coefficient table of the optimizer, the losses and gradient norms. Elsewhere, when
  // the capture fails, or (auto) where a replay is not faster than the eager step, the group trains eagerly. On
  // stderr: why not, where the setting asked for a graph, and auto's timing on CUDA.
  void CaptureStep() {
    std::vector<std::shared_ptr<Model>> lone;
    for (const MemberState& member : members_) lone.push_back(member.lone);
    CaptureUnlessRefused(
        "group", settings_.cuda_graph, device_, {.host_dropout = DropoutOf(lone) > 0, .profiled = profile_.planned()},
        [this](bool timed, std::optional<GraphTiming>& timing) {
          const torch::TensorOptions on_device = torch::TensorOptions().device(device_);
          graphed_.rows = torch::zeros({count(), batch_size_}, on_device.dtype(torch::kInt64));
          // Warm-up runs with every member masked (a learning rate of 0, nothing updated): only the batch-norm
          // averages move, and they are put back.
          graphed_.table =
              optimizer_
                  ->CoefficientTable(std::vector<double>(members_.size(), 0.0), std::vector<bool>(members_.size()))
                  .to(device_);
          graphed_.losses = torch::zeros({count()}, on_device.dtype(torch::kFloat));
          graphed_.norms = torch::zeros({count()}, on_device.dtype(torch::kDouble));
          const KeptTensors averages(model_->buffers());
          std::string why_not;
          try {
            CapturedStep captured = CaptureStepGraph([this] { GraphedStep(); }, timed);
            graph_ = std::move(captured.graph);
            timing = captured.timing;
            if (!graph_) why_not = "auto: " + timing->Text();
          } catch (const std::exception& e) {
            why_not = e.what();
          }
          averages.Restore();
          return why_not;
        });
  }

  // The step as captured: gathers the rows in graphed_.rows, trains every member one step with graphed_.table's
  // coefficients, and leaves the losses and norms in graphed_.
  void GraphedStep() {
    optimizer_->ZeroGrad();  // the backward of the capture makes the gradients, which each replay then overwrites
    model_->train();
    const Batch batch = group_batches_->Gather(graphed_.rows);
    const torch::Tensor logits = model_->ForwardStacked(batch.inputs);
    const torch::Tensor losses =
        workload_.PerExampleLoss(logits.flatten(0, 1), batch.labels.flatten()).view({count(), batch_size_}).mean(1);
    losses.sum().backward();
    const torch::Tensor norms = optimizer_->ApplyTable(graphed_.table);
    torch::NoGradGuard no_grad;
    graphed_.losses.copy_(losses.detach());
    graphed_.norms.copy_(norms);
  }

  // Reads the steps not read yet (every one on the CPU, a log interval's on a device) into each member's record, and
  // applies the divergence rule to each: a member that diverged is masked from then on (on a device its updates of
  // the steps after that one, until this read, are lost with it).
  void ReadPendingSteps() {
    if (pending_.empty()) return;
    const double elapsed = Seconds(Clock::now() - interval_start_);
    seconds_["data_wait"] += data_wait_;
    TraceSpan span(profile_.tracing(), "metrics");
    std::vector<torch::Tensor> losses, norms;
    for (const PendingStep& step : pending_) {
      losses.push_back(step.losses);
      norms.push_back(step.norms);
    }
    // [steps, M] each, read in one copy.
    const torch::Tensor loss_values = torch::stack(losses).to(torch::kCPU, torch::kDouble).contiguous();
    const torch::Tensor norm_values = torch::stack(norms).to(torch::kCPU, torch::kDouble).contiguous();
    const auto loss_at = loss_values.accessor<double, 2>();
    const auto norm_at = norm_values.accessor<double, 2>();
    const std::int64_t first = step_ - static_cast<std::int64_t>(pending_.size()) + 1;
    // Each step's share of the interval's time, as a lone trial's: the group's steps are each member's.
    std::vector<StepMetrics> timed(pending_.size());
    ShareIntervalTime(timed, elapsed, data_wait_, batch_size_);
    data_wait_ = 0;
    for (std::size_t i = 0; i < pending_.size(); ++i) {
      const auto row = static_cast<std::int64_t>(i);
      for (std::int64_t m = 0; m < count(); ++m) {
        MemberState& member = members_[static_cast<std::size_t>(m)];
        if (!member.active) continue;
        StepMetrics metrics = timed[i];
        metrics.step = first + row;
        metrics.loss = loss_at[row][m];
        metrics.learning_rate = pending_[i].learning_rates[static_cast<std::size_t>(m)];
        metrics.grad_norm = norm_at[row][m];
        member.out.steps.push_back(metrics);
        CheckDivergence(member);
      }
    }
    pending_.clear();
  }

  // The divergence rule on the member's last step; a member that diverged is masked.
  void CheckDivergence(MemberState& member) {
    const StepMetrics& m = member.out.steps.back();
    std::optional<std::string> reason = Divergence(member.initial_loss, m.loss, m.step, settings_.divergence_factor);
    if (!reason) return;
    member.active = false;
    member.out.result.outcome = TrainOutcome::kInfeasible;
    member.out.result.reason = std::move(*reason);
    member.out.result.steps = m.step;
    ReportEnd(member);
  }

  // Gives the callbacks the member's steps not given yet.
  void ReportSteps(MemberState& member) {
    if (!callbacks_ || member.steps_reported == member.out.steps.size()) return;
    const auto from = member.out.steps.begin() + static_cast<std::ptrdiff_t>(member.steps_reported);
    callbacks_->OnTrainMetrics(Index(member), std::vector<StepMetrics>(from, member.out.steps.end()));
    member.steps_reported = member.out.steps.size();
  }

  // Gives the callbacks the member's last steps, its last checkpoint and its end, once.
  void ReportEnd(MemberState& member) {
    FinishCheckpointWrite(member);
    ReportSteps(member);
    if (!callbacks_ || member.ended) return;
    member.ended = true;
    callbacks_->OnEnd(Index(member), Result(member));
  }

  std::size_t Index(const MemberState& member) const { return static_cast<std::size_t>(&member - members_.data()); }

  // The members' fixed samples of `split`, `wanted` examples each (at most the split's size): the split itself, which
  // they share, when they take all of it; else each member's own (from its data seed's stream `stream`, as its lone
  // trial's), interleaved.
  EvalSplit FixedSamples(const Dataset& split, std::int64_t wanted, std::uint64_t stream) const {
    const std::int64_t count = std::min(wanted, split.size());
    if (count == split.size()) return {split, /*shared=*/true};
    std::vector<std::uint64_t> seeds;
    for (const MemberState& member : members_) seeds.push_back(MixSeed(member.spec->data_seed, stream));
    return {InterleavedFixedSamples(split, count, seeds), /*shared=*/false};
  }

  // Each member's weighted sums of loss, correct predictions and correct predictions by class over its examples of
  // `split`, as the lone trainer's evaluation takes them: [M] tensors and an [M, classes] one, every member's batch in
  // the same few kernels (a masked member's sums are computed and left unread).
  struct Sums {
    torch::Tensor loss, correct, weight, class_correct;
  };
  Sums SumsOf(const EvalSplit& split) {
    torch::NoGradGuard no_grad;
    model_->eval();
    const std::int64_t classes = workload_.num_classes();
    const auto zeros = [&](at::IntArrayRef shape) {
      return torch::zeros(shape, torch::TensorOptions(torch::kDouble).device(device_));
    };
    Sums sums{zeros({count()}), zeros({count()}), zeros({count()}), zeros({count(), classes})};
    const EvalBatches batches = MakeEvalBatches(split.data, eval_batch_size_);
    for (std::int64_t index = 0; index < batches.size(); ++index) {
      const Dataset rows = batches.Rows(index);
      // [M, B, classes] and [M, B]: one batch all members take, or each member's own (interleaved: [B, M, ...]).
      const torch::Tensor outputs =
          split.shared ? model_->ForwardShared(rows.inputs) : model_->ForwardStacked(rows.inputs.transpose(0, 1));
      const torch::Tensor label =
          split.shared ? rows.labels.unsqueeze(0).expand({count(), eval_batch_size_}) : rows.labels.transpose(0, 1);
      // The members' examples are as many, so their batches' weights are alike: made once, not once a member.
      const torch::Tensor weight =
          batches.Weights(index).to(torch::kDouble).unsqueeze(0).expand({count(), eval_batch_size_});
      const torch::Tensor losses =
          workload_.PerExampleLoss(outputs.flatten(0, 1), label.flatten()).to(torch::kDouble).view_as(weight);
      const torch::Tensor correct = (outputs.argmax(2) == label).to(torch::kDouble) * weight;
      sums.loss += (losses * weight).sum(1);
      sums.correct += correct.sum(1);
      sums.weight += weight.sum(1);
      if (device_.is_cpu()) {
        sums.class_correct.scatter_add_(1, label, correct);
      } else {
        // As the lone trainer on a device: whole numbers in double, exact in any order (a scatter of more than one
        // dimension has no deterministic CUDA kernel).
        sums.class_correct += (torch::one_hot(label, classes).to(torch::kDouble) * correct.unsqueeze(2)).sum(1);
      }
    }
    return {sums.loss.cpu(), sums.correct.cpu(), sums.weight.cpu(), sums.class_correct.cpu()};
  }

  // Adds the metrics of split `name` to each active member's `metrics`.
  void AddSplitMetrics(const std::string& name, const EvalSplit& split, std::vector<std::vector<EvalMetric>>& metrics) {
    if (split.data.size() == 0) return;
    const Sums sums = SumsOf(split);  // on the CPU
    const auto weights = sums.weight.accessor<double, 1>();
    const auto losses = sums.loss.accessor<double, 1>();
    const auto corrects = sums.correct.accessor<double, 1>();
    const auto class_corrects = sums.class_correct.accessor<double, 2>();
    for (std::size_t m = 0; m < members_.size(); ++m) {
      if (!members_[m].active) continue;
      const auto member = static_cast<std::int64_t>(m);
      SplitSums own{losses[member], corrects[member], weights[member], {}};
      for (std::int64_t k = 0; k < class_corrects.size(1); ++k) own.class_correct.push_back(class_corrects[member][k]);
      AddMetricsFromSums(name, own, metrics[m]);
    }
  }

  // The lone trainer's evaluation at this step, for every active member, and its checkpoint.
  void Evaluate(bool last) {
    TraceSpan span(profile_.tracing(), "evaluation");
    const Clock::time_point began = Clock::now();
    const double checkpoints_before = seconds_["checkpoint"];
    std::vector<std::vector<EvalMetric>> metrics(members_.size());
    for (const std::string& split : SplitsToEvaluate(settings_, last))
      AddSplitMetrics(split, SplitNamed(split), metrics);
    for (std::size_t m = 0; m < members_.size(); ++m) {
      MemberState& member = members_[m];
      if (!member.active) continue;
      const std::optional<double> objective = ObjectiveValue(options_.objective, metrics[m]);
      member.best.Record(step_, objective, options_.objective.direction);
      ReportSteps(member);
      if (callbacks_) {
        callbacks_->OnEvaluation(m, step_, metrics[m], member.best.step.value_or(0),
                                 member.best.value.value_or(std::nan("")));
      }
      member.out.evaluations.emplace_back(step_, std::move(metrics[m]));
      SaveCheckpoint(member, objective);
    }
    seconds_["evaluation"] += Seconds(Clock::now() - began) - (seconds_["checkpoint"] - checkpoints_before);
  }

  // The split an evaluation names (SplitsToEvaluate), as the group holds it.
  const EvalSplit& SplitNamed(const std::string& name) const {
    if (name == "train") return train_subset_;
    if (name == "valid_sample") return valid_sample_;
    return name == "valid" ? valid_ : test_;
  }

  // Writes the member's checkpoint at this step in the lone trainer's format (trainer.cc, SaveCheckpoint): what it
  // holds copied now; its archive built and serialized, the file written, synced and the older ones retired on a
  // thread of its own while the group trains on (a group's members write a checkpoint each at every evaluation);
  // reported when the next one starts or the member ends.
  void SaveCheckpoint(MemberState& member, std::optional<double> objective) {
    if (!member.checkpoints) return;
    TraceSpan span(profile_.tracing(), "checkpoint");
    const Clock::time_point began = Clock::now();
    FinishCheckpointWrite(member);
    const auto m = static_cast<std::int64_t>(&member - members_.data());
    model_->CopyMemberInto(m, *member.lone);
    member.saved_step = step_;
    // Building and serializing the archive is most of a checkpoint's time. The lone model's tensors, which the
    // archive reads, change only at this member's next save, after this write ends (FinishCheckpointWrite above).
    member.checkpoint_write = SaveStateInBackground(
        *member.checkpoints, step_, objective,
        [lone = member.lone, optimizer = optimizer_->CopyMember(m),
         progress = TrainingProgress{step_, member.best.step, member.best.value, member.initial_loss,
                                     model_->DropoutGenerator(m).get_state()},
         threads = static_cast<std::int64_t>(torch::get_num_threads())] {
          return WriteTrainingState(
              *lone, [&](torch::serialize::OutputArchive& archive) { optimizer.Save(archive); }, progress, threads);
        });
    seconds_["checkpoint"] += Seconds(Clock::now() - began);
  }

  // Waits for the member's checkpoint being written, if any, and reports it; rethrows the error it failed with.
  void FinishCheckpointWrite(MemberState& member) {
    if (!member.checkpoint_write.valid()) return;
    const SavedCheckpoint saved = member.checkpoint_write.get();
    member.out.checkpoints.push_back(saved.info.path.string());
    if (!callbacks_) return;
    for (const CheckpointEvent& event : CheckpointEvents(saved)) callbacks_->OnCheckpoint(Index(member), event);
  }

  FusedMemberResult Finish(MemberState& member) {
    TrainResult& result = member.out.result;
    if (member.active) {
      result.steps = step_;
      if (step_ < options_.max_train_steps) {
        // Stopped: its checkpoint is the one the evaluation of this step wrote, or one written now.
        if (member.saved_step != step_) SaveCheckpoint(member, std::nullopt);
        result.outcome = TrainOutcome::kStopped;
        result.reason = fmt::format("stopped at step {}; resumable from its checkpoint", step_);
      }
    }
    result.threads = torch::get_num_threads();
    ReportEnd(member);
    member.out.result = Result(member);
    return std::move(member.out);
  }

  // The member's result as its lone trial's: with its best and last objective values.
  static TrainResult Result(const MemberState& member) {
    TrainResult result = member.out.result;
    result.best_step = member.best.step;
    result.best_value = member.best.value;
    result.final_value = member.best.last;
    return result;
  }

  Workload& workload_;
  const FusedOptions& options_;
  const TrainingSettings settings_;
  EvalSchedule eval_schedule_;
  torch::Device device_;
  const bool deferred_;  // FusedOptions::deferred, or a device
  // On device_ (test_ only when it is evaluated, valid_sample_ only when asked for).
  EvalSplit valid_, test_, train_subset_, valid_sample_;
  // A step whose losses and gradient norms ([M] each, on the device) are not read yet, with its learning rates.
  struct PendingStep {
    torch::Tensor losses, norms;
    std::vector<double> learning_rates;
  };
  std::vector<PendingStep> pending_;
  std::unique_ptr<GroupBatches> group_batches_;  // the members' batches, gathered together
  std::unique_ptr<StepGraph> graph_;             // training.cuda_graph, captured; null: eager
  struct {
    torch::Tensor rows, table, losses, norms;
  } graphed_;  // the captured step's inputs and outputs
  std::vector<MemberState> members_;
  std::int64_t batch_size_ = 0;
  std::int64_t eval_batch_size_ = 0;
  std::shared_ptr<ArrayModel> model_;
  std::unique_ptr<ArrayOptimizer> optimizer_;
  std::int64_t step_ = 0;
  Clock::time_point interval_start_;  // when the steps not read yet began (after the last read and evaluation)
  double data_wait_ = 0;              // seconds of those steps spent gathering their batches
  MemberCallbacks* callbacks_ = options_.callbacks;
  ProfileRecorder profile_;                // training.profile_steps
  std::filesystem::path profile_written_;  // the group's trace, once written
  // Where the group's time went on this thread, in TrainResult::seconds' phases (the checkpoints' part on this
  // thread: copying what they hold; serializing and writing them runs beside the steps).
  std::map<std::string, double> seconds_;
};

}  // namespace

std::vector<FusedMemberResult> TrainFused(Workload& workload, const std::vector<FusedMember>& members,
                                          const FusedOptions& options) {
  CheckOptions(options, members.size());
  SetTorchThreads(options.training.threads);
  FusedLoop loop(workload, members, options);
  return loop.Run();
}

}  // namespace dltune
