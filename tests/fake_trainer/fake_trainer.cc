// A trainer module of another build (trainer/trainer_table.h), which the trainer's seam must refuse.
#include "trainer/trainer_table.h"

extern "C" __attribute__((visibility("default"))) const dltune::TrainerTable* dltune_trainer_table() {
  static const dltune::TrainerTable table{
      .version = dltune::kTrainerTableVersion, .size = sizeof(dltune::TrainerTable), .build = "0.0.0 (fake)"};
  return &table;
}
