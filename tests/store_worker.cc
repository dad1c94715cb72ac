// A worker process for the store's multi-process tests.
//   store_worker URL STUDY WORKER drain ROWS   claim trials until none is left; for each, record ROWS training
//                                              measurements in batches plus evaluations, then finish it. Prints
//                                              "claimed N" per trial.
//   store_worker URL STUDY WORKER hold         claim one trial, record a few measurements, print "holding N",
//                                              then wait to be killed.
//   store_worker URL STUDY WORKER test-split   hold the study's test split (Store::LockTestSplit), print "held"
//                                              (or "busy" when another holds it), then wait to be killed.
//   store_worker URL STUDY WORKER kept         as hold, with the lease kept alive by the store (Store::KeepAlive,
//                                              every 0.05 s) while this thread sleeps, until killed.
//   store_worker URL STUDY WORKER train FROM TO EVERY [PAUSE]
//                                              claim a trial ("claimed N") and record it as a worker records a
//                                              resumed trial: begin at FROM (TruncateAfter), then steps FROM+1..TO in
//                                              small batches, an evaluation every EVERY steps written with the steps
//                                              before it, then that step's checkpoint, printing "checkpoint N";
//                                              finish it completed at TO. After checkpoint PAUSE, wait to be
//                                              killed instead.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "dltune/store/store.h"

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr,
                 "usage: store_worker URL STUDY WORKER drain ROWS | hold | kept | test-split | train FROM TO EVERY\n");
    return 2;
  }
  try {
    auto store = dltune::OpenStore(argv[1]);
    const auto study = store->FindStudy(argv[2]);
    if (!study) throw dltune::Error(std::string("no study ") + argv[2]);
    const std::string worker = argv[3];
    const std::string mode = argv[4];
    if (mode == "test-split") {
      std::unique_ptr<dltune::StoreLock> lock;
      try {
        lock = store->LockTestSplit(study->id);
      } catch (const dltune::Error& e) {
        if (e.kind() != dltune::ErrorKind::kConflict) throw;
        std::printf("busy\n");
        return 4;
      }
      std::printf("held\n");
      std::fflush(stdout);
      std::this_thread::sleep_for(std::chrono::hours(1));
      return 0;
    }
    if (mode == "hold" || mode == "kept") {
      const auto claim = store->ClaimNext(study->id, worker);
      if (!claim) return 3;
      dltune::MeasurementBatch batch;
      for (int step = 1; step <= 10; ++step) batch.train.push_back({.step = step, .loss = 1.0 / step});
      store->Record(claim->second, batch);
      const auto kept = mode == "kept" ? store->KeepAlive(claim->second, 0.05) : nullptr;
      std::printf("holding %llu\n", static_cast<unsigned long long>(claim->first.number));
      std::fflush(stdout);
      std::this_thread::sleep_for(std::chrono::hours(1));
      return 0;
    }
    if (mode == "train") {
      if (argc < 8) throw dltune::Error("train needs FROM TO EVERY");
      const std::int64_t from = std::atoll(argv[5]), to = std::atoll(argv[6]), every = std::atoll(argv[7]);
      const std::int64_t pause = argc > 8 ? std::atoll(argv[8]) : -1;
      const auto claim = store->ClaimNext(study->id, worker);
      if (!claim) return 3;
      std::printf("claimed %llu\n", static_cast<unsigned long long>(claim->first.number));
      std::fflush(stdout);
      const auto& lease = claim->second;
      store->TruncateAfter(lease, from);
      dltune::MeasurementBatch batch;
      for (std::int64_t step = from + 1; step <= to; ++step) {
        batch.train.push_back({.step = step, .loss = 1.0 / static_cast<double>(step)});
        if (step % every == 0) {
          batch.evals.push_back({step, "valid", "error_rate", 1.0 / static_cast<double>(step), 100});
          store->Record(lease, batch);
          batch = {};
          store->AddCheckpoint(lease, {.step = step, .path = "/c/" + std::to_string(step), .checksum = "x"});
          std::printf("checkpoint %lld\n", static_cast<long long>(step));
          std::fflush(stdout);
          if (step == pause) std::this_thread::sleep_for(std::chrono::hours(1));
        } else if (step % 7 == 0) {
          store->Record(lease, batch);
          batch = {};
        }
      }
      store->Record(lease, batch);
      store->Finish(lease, {.state = dltune::TrialState::kCompleted, .final_value = 0.5});
      return 0;
    }
    const int rows = argc > 5 ? std::atoi(argv[5]) : 10;
    while (const auto claim = store->ClaimNext(study->id, worker)) {
      const auto& lease = claim->second;
      std::printf("claimed %llu\n", static_cast<unsigned long long>(claim->first.number));
      std::fflush(stdout);
      for (int start = 1; start <= rows; start += 50) {
        dltune::MeasurementBatch batch;
        for (int step = start; step < start + 50 && step <= rows; ++step) {
          dltune::TrainMeasurement m;
          m.step = step;
          m.loss = 1.0 / step;
          m.learning_rate = 0.1;
          batch.train.push_back(m);
        }
        batch.evals.push_back({start, "valid", "error_rate", 0.5, 100});
        batch.best_step = start;
        batch.best_value = 0.5;
        store->Record(lease, batch);
      }
      store->Finish(lease, {.state = dltune::TrialState::kCompleted, .final_value = 0.5});
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "store_worker %s: %s\n", argv[3], e.what());
    return 1;
  }
}
