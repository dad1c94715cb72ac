// Test helpers of the run module: a temporary directory with a SQLite store, and specs of shell-script trials.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include "core/files.h"
#include "dltune/store/store.h"
#include "dltune/study/study_spec.h"

namespace dltune::test {

class TempStore {
 public:
  TempStore() {
    static int counter = 0;
    dir_ = std::filesystem::temp_directory_path() /
           ("dltune_run_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    RemoveTree(dir_);
    std::filesystem::create_directories(dir_);
    store_ = OpenStore("sqlite://" + (dir_ / "store.db").string());
  }
  ~TempStore() {
    store_.reset();
    RemoveTree(dir_);
  }
  Store& store() { return *store_; }
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  std::unique_ptr<Store> store_;
};

// A study of `trials` trials running `command` (YAML-quoted here), with trial directories under `dir`.
inline StudySpec CommandSpec(const std::string& name, const std::string& command, const std::filesystem::path& dir,
                             int trials = 2, const std::string& extra = "") {
  return ParseStudySpec("name: " + name + "\ncommand: '" + command + "'\nmax_train_steps: 4\ntrials: " +
                            std::to_string(trials) + "\nrun_dir: " + (dir / "runs").string() + "\n" + extra +
                            "space:\n  learning_rate: {min: 0.01, max: 1, scale: log}\n",
                        name + ".yaml");
}

}  // namespace dltune::test
