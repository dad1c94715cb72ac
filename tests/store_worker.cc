// A worker process for the store's multi-process tests.
//   store_worker URL STUDY WORKER drain ROWS   claim trials until none is left; for each, record ROWS training
//                                              measurements in batches plus evaluations, then finish it. Prints
//                                              "claimed N" per trial.
//   store_worker URL STUDY WORKER hold         claim one trial, record a few measurements, print "holding N",
//                                              then wait to be killed.
//   store_worker URL STUDY WORKER test-split   hold the study's test split (Store::LockTestSplit), print "held"
//                                              (or "busy" when another holds it), then wait to be killed.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "dltune/store/store.h"

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: store_worker URL STUDY WORKER drain ROWS | hold | test-split\n");
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
    if (mode == "hold") {
      const auto claim = store->ClaimNext(study->id, worker);
      if (!claim) return 3;
      dltune::MeasurementBatch batch;
      for (int step = 1; step <= 10; ++step) batch.train.push_back({.step = step, .loss = 1.0 / step});
      store->Record(claim->second, batch);
      std::printf("holding %llu\n", static_cast<unsigned long long>(claim->first.number));
      std::fflush(stdout);
      std::this_thread::sleep_for(std::chrono::hours(1));
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
