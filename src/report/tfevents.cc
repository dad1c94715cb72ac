// TensorBoard event files, written and read without the protobuf library: dltune writes five fields of three
// messages, so the wire format is encoded by hand.
//
// Field numbers, checked against TensorFlow's own definitions (tensorflow/tensorflow on GitHub):
//   tensorflow/core/util/event.proto      message Event   { double wall_time = 1; int64 step = 2;
//                                                           oneof what { string file_version = 3; ...;
//                                                                        Summary summary = 5; ... } }
//   tensorflow/core/framework/summary.proto message Summary { repeated Value value = 1; }
//                                           message Summary.Value { string tag = 1;
//                                                                   oneof value { float simple_value = 2; ... } }
// (TensorBoard's copies under tensorboard/compat/proto/ have the same numbers.) Encoding follows proto3's canonical
// serialization, fields in number order: a scalar field at its default (wall_time 0, step 0, empty tag) is left
// out, while a oneof member (file_version, summary, simple_value) is always written, so the bytes equal what the
// protobuf library produces for the same message (tools/tfevents_reference.py checks this with protoc).

#include "report/tfevents.h"

#include <unistd.h>

#include <bit>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <system_error>

#include "core/clock.h"
#include "core/files.h"
#include "report/crc32c.h"

namespace dltune {
namespace {

// Event
constexpr std::uint32_t kEventWallTime = 1;     // double
constexpr std::uint32_t kEventStep = 2;         // int64
constexpr std::uint32_t kEventFileVersion = 3;  // string
constexpr std::uint32_t kEventSummary = 5;      // Summary
// Summary
constexpr std::uint32_t kSummaryValue = 1;  // repeated Summary.Value
// Summary.Value
constexpr std::uint32_t kValueTag = 1;          // string
constexpr std::uint32_t kValueSimpleValue = 2;  // float

enum class WireType : std::uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// TFRecord framing: 8 bytes of length, 4 of its masked CRC; after the data, 4 of the data's masked CRC.
constexpr std::size_t kHeaderSize = 12;
constexpr std::size_t kFooterSize = 4;

// --- Encoding ---------------------------------------------------------------------------------------------------

void AppendVarint(std::string& out, std::uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void AppendLittleEndian(std::string& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

void AppendKey(std::string& out, std::uint32_t field, WireType type) {
  AppendVarint(out, (std::uint64_t{field} << 3) | static_cast<std::uint32_t>(type));
}

void AppendBytes(std::string& out, std::uint32_t field, std::string_view bytes) {
  AppendKey(out, field, WireType::kLengthDelimited);
  AppendVarint(out, bytes.size());
  out.append(bytes);
}

// Event fields 1 and 2, left out at their defaults as proto3 does (a wall_time of -0.0 is not a default).
std::string EncodeEventHeader(double wall_time, std::int64_t step) {
  std::string event;
  if (std::bit_cast<std::uint64_t>(wall_time) != 0) {
    AppendKey(event, kEventWallTime, WireType::kFixed64);
    AppendLittleEndian(event, std::bit_cast<std::uint64_t>(wall_time), 8);
  }
  if (step != 0) {
    AppendKey(event, kEventStep, WireType::kVarint);
    AppendVarint(event, static_cast<std::uint64_t>(step));  // negative int64: ten bytes of two's complement
  }
  return event;
}

std::string EncodeFileVersionEvent(double wall_time) {
  std::string event = EncodeEventHeader(wall_time, 0);
  AppendBytes(event, kEventFileVersion, kTfEventsFileVersion);
  return event;
}

std::string EncodeScalarEvent(std::string_view tag, std::int64_t step, float value, double wall_time) {
  std::string summary_value;
  if (!tag.empty()) AppendBytes(summary_value, kValueTag, tag);
  AppendKey(summary_value, kValueSimpleValue, WireType::kFixed32);
  AppendLittleEndian(summary_value, std::bit_cast<std::uint32_t>(value), 4);

  std::string summary;
  AppendBytes(summary, kSummaryValue, summary_value);

  std::string event = EncodeEventHeader(wall_time, step);
  AppendBytes(event, kEventSummary, summary);
  return event;
}

std::string EncodeLength(std::uint64_t length) {
  std::string bytes;
  AppendLittleEndian(bytes, length, 8);
  return bytes;
}

// --- Decoding ---------------------------------------------------------------------------------------------------

// A malformed record; ReadTfEvents adds the file and the record index.
struct DecodeError {
  std::string message;
};

std::uint64_t LoadLittleEndian(std::string_view bytes) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    value |= std::uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  }
  return value;
}

// Reads one protobuf message's fields in order.
class ProtoReader {
 public:
  ProtoReader(std::string_view bytes, const char* message) : bytes_(bytes), message_(message) {}

  bool AtEnd() const { return pos_ == bytes_.size(); }

  // The next field's number and wire type.
  std::pair<std::uint32_t, std::uint32_t> ReadKey() {
    const std::uint64_t key = ReadVarint();
    const std::uint64_t field = key >> 3;
    if (field == 0 || field > 0x1FFFFFFF) Fail("invalid field number " + std::to_string(field));
    return {static_cast<std::uint32_t>(field), static_cast<std::uint32_t>(key & 7)};
  }

  std::uint64_t ReadVarint() {
    std::uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ == bytes_.size()) Fail("varint runs past the end");
      const auto byte = static_cast<unsigned char>(bytes_[pos_++]);
      value |= std::uint64_t{byte & 0x7Fu} << shift;
      if ((byte & 0x80) == 0) return value;
    }
    Fail("varint longer than 10 bytes");
  }

  std::string_view ReadFixed(std::size_t size) {
    if (bytes_.size() - pos_ < size) Fail("fixed-size field runs past the end");
    const std::string_view field = bytes_.substr(pos_, size);
    pos_ += size;
    return field;
  }

  std::string_view ReadLengthDelimited() {
    const std::uint64_t size = ReadVarint();
    if (size > bytes_.size() - pos_) Fail("length-delimited field runs past the end");
    return ReadFixed(static_cast<std::size_t>(size));
  }

  void Skip(std::uint32_t wire_type) {
    switch (static_cast<WireType>(wire_type)) {
      case WireType::kVarint: ReadVarint(); return;
      case WireType::kFixed64: ReadFixed(8); return;
      case WireType::kLengthDelimited: ReadLengthDelimited(); return;
      case WireType::kFixed32: ReadFixed(4); return;
    }
    Fail("unsupported wire type " + std::to_string(wire_type));
  }

  // Checks that field `field` has wire type `expected`.
  void Expect(std::uint32_t field, std::uint32_t wire_type, WireType expected) {
    if (wire_type != static_cast<std::uint32_t>(expected)) {
      Fail("field " + std::to_string(field) + " has wire type " + std::to_string(wire_type) + ", expected " +
           std::to_string(static_cast<std::uint32_t>(expected)));
    }
  }

  [[noreturn]] void Fail(const std::string& what) const {
    throw DecodeError{std::string(message_) + " at byte " + std::to_string(pos_) + ": " + what};
  }

 private:
  std::string_view bytes_;
  const char* message_;
  std::size_t pos_ = 0;
};

void DecodeSummaryValue(std::string_view bytes, TfEvent& event) {
  ProtoReader reader(bytes, "Summary.Value");
  TfScalar scalar;
  bool has_simple_value = false;
  while (!reader.AtEnd()) {
    const auto [field, wire_type] = reader.ReadKey();
    if (field == kValueTag) {
      reader.Expect(field, wire_type, WireType::kLengthDelimited);
      scalar.tag = reader.ReadLengthDelimited();
    } else if (field == kValueSimpleValue) {
      reader.Expect(field, wire_type, WireType::kFixed32);
      scalar.value = std::bit_cast<float>(static_cast<std::uint32_t>(LoadLittleEndian(reader.ReadFixed(4))));
      has_simple_value = true;
    } else {
      reader.Skip(wire_type);
    }
  }
  if (has_simple_value) event.scalars.push_back(std::move(scalar));
}

void DecodeSummary(std::string_view bytes, TfEvent& event) {
  ProtoReader reader(bytes, "Summary");
  while (!reader.AtEnd()) {
    const auto [field, wire_type] = reader.ReadKey();
    if (field == kSummaryValue) {
      reader.Expect(field, wire_type, WireType::kLengthDelimited);
      DecodeSummaryValue(reader.ReadLengthDelimited(), event);
    } else {
      reader.Skip(wire_type);
    }
  }
}

TfEvent DecodeEvent(std::string_view bytes) {
  ProtoReader reader(bytes, "Event");
  TfEvent event;
  while (!reader.AtEnd()) {
    const auto [field, wire_type] = reader.ReadKey();
    if (field == kEventWallTime) {
      reader.Expect(field, wire_type, WireType::kFixed64);
      event.wall_time = std::bit_cast<double>(LoadLittleEndian(reader.ReadFixed(8)));
    } else if (field == kEventStep) {
      reader.Expect(field, wire_type, WireType::kVarint);
      event.step = static_cast<std::int64_t>(reader.ReadVarint());
    } else if (field == kEventFileVersion) {
      reader.Expect(field, wire_type, WireType::kLengthDelimited);
      event.file_version = reader.ReadLengthDelimited();
    } else if (field == kEventSummary) {
      reader.Expect(field, wire_type, WireType::kLengthDelimited);
      DecodeSummary(reader.ReadLengthDelimited(), event);
    } else {
      reader.Skip(wire_type);
    }
  }
  return event;
}

std::string Hex32(std::uint32_t value) {
  char text[11];
  std::snprintf(text, sizeof text, "0x%08x", value);
  return text;
}

std::string ErrnoText() { return std::generic_category().message(errno); }

std::string Hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  std::string host = name;
  for (char& c : host) {
    if (c == '/') c = '_';
  }
  return host;
}

}  // namespace

std::string TfEventsEvalTag(std::string_view split, std::string_view metric) {
  std::string tag(split);
  tag += '/';
  tag += metric;
  return tag;
}

void TfEventsWriter::FileCloser::operator()(std::FILE* file) const { std::fclose(file); }

TfEventsWriter::TfEventsWriter(const std::filesystem::path& dir) : TfEventsWriter(dir, WallSeconds()) {}

TfEventsWriter::TfEventsWriter(const std::filesystem::path& dir, double wall_time) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) throw IoError(dir.string() + ": cannot create the directory for TensorBoard events: " + error.message());

  // TensorFlow's EventsWriter names files "events.out.tfevents.%010lld.<hostname>".
  char seconds[32];
  const double whole = std::isfinite(wall_time) ? std::floor(wall_time) : 0.0;
  std::snprintf(seconds, sizeof seconds, "%010lld", static_cast<long long>(whole));
  const std::string base = std::string("events.out.tfevents.") + seconds + "." + Hostname();
  for (int attempt = 0;; ++attempt) {
    path_ = dir / (attempt == 0 ? base : base + "." + std::to_string(attempt));
    // "x": create exclusively, never reuse a file another writer made in the same second.
    file_.reset(std::fopen(path_.c_str(), "wbxe"));  // e: O_CLOEXEC, kept out of the trials it starts
    if (file_) break;
    if (errno != EEXIST || attempt >= 1000) {
      throw IoError(path_.string() + ": cannot create the TensorBoard event file: " + ErrnoText());
    }
  }
  WriteRecord(EncodeFileVersionEvent(wall_time));
  Flush();
}

TfEventsWriter::~TfEventsWriter() = default;  // FileCloser flushes and closes

void TfEventsWriter::AddScalar(std::string_view tag, std::int64_t step, double value, double wall_time) {
  WriteRecord(EncodeScalarEvent(tag, step, static_cast<float>(value), wall_time));
}

void TfEventsWriter::AddTrainMeasurement(const TrainMeasurement& train, double wall_time) {
  if (train.loss) AddScalar("train/loss", train.step, *train.loss, wall_time);
  if (train.learning_rate) AddScalar("train/learning_rate", train.step, *train.learning_rate, wall_time);
  if (train.grad_norm) AddScalar("train/grad_norm", train.step, *train.grad_norm, wall_time);
}

void TfEventsWriter::AddEvalMeasurement(const EvalMeasurement& eval, double wall_time) {
  AddScalar(TfEventsEvalTag(eval.split, eval.metric), eval.step, eval.value, wall_time);
}

void TfEventsWriter::Flush() {
  if (!file_) throw std::logic_error("TfEventsWriter::Flush on a closed writer");
  if (std::fflush(file_.get()) != 0)
    throw IoError(path_.string() + ": cannot write TensorBoard events: " + ErrnoText());
}

void TfEventsWriter::Close() {
  if (!file_) return;
  std::FILE* file = file_.release();
  std::string failure;
  if (std::fflush(file) != 0) failure = ErrnoText();
  if (std::fclose(file) != 0 && failure.empty()) failure = ErrnoText();
  if (!failure.empty()) throw IoError(path_.string() + ": cannot write TensorBoard events: " + failure);
}

void TfEventsWriter::WriteRecord(std::string_view data) {
  if (!file_) throw std::logic_error("TfEventsWriter: writing to a closed writer");
  const std::string length = EncodeLength(data.size());
  std::string record;
  record.reserve(kHeaderSize + data.size() + kFooterSize);
  record += length;
  AppendLittleEndian(record, crc32c::Mask(crc32c::Value(length)), 4);
  record += data;
  AppendLittleEndian(record, crc32c::Mask(crc32c::Value(data)), 4);
  if (std::fwrite(record.data(), 1, record.size(), file_.get()) != record.size()) {
    throw IoError(path_.string() + ": cannot write TensorBoard events: " + ErrnoText());
  }
}

std::vector<TfEvent> ReadTfEvents(const std::filesystem::path& path) {
  const std::optional<std::string> read = ReadFileIfReadable(path);
  if (!read) throw IoError(path.string() + ": cannot open the TensorBoard event file");
  const std::string& contents = *read;
  const std::string_view bytes = contents;

  std::vector<TfEvent> events;
  std::size_t offset = 0;
  for (std::size_t index = 0; offset < bytes.size(); ++index) {
    const auto fail = [&](const std::string& what) {
      throw Error(path.string() + ": record " + std::to_string(index) + " (at byte " + std::to_string(offset) +
                  "): " + what);
    };
    const std::size_t left = bytes.size() - offset;
    if (left < kHeaderSize) {
      fail("truncated: " + std::to_string(left) + " bytes left, the record header needs " +
           std::to_string(kHeaderSize));
    }
    const std::string_view length_bytes = bytes.substr(offset, 8);
    const auto length_crc = static_cast<std::uint32_t>(LoadLittleEndian(bytes.substr(offset + 8, 4)));
    if (crc32c::Unmask(length_crc) != crc32c::Value(length_bytes)) {
      fail("length CRC mismatch (stored " + Hex32(crc32c::Unmask(length_crc)) + ", computed " +
           Hex32(crc32c::Value(length_bytes)) + ")");
    }
    const std::uint64_t length = LoadLittleEndian(length_bytes);
    if (length > left - kHeaderSize || left - kHeaderSize - length < kFooterSize) {
      fail("truncated: the record holds " + std::to_string(length) + " bytes of data but only " +
           std::to_string(left - kHeaderSize) + " bytes follow its header");
    }
    const std::string_view data = bytes.substr(offset + kHeaderSize, static_cast<std::size_t>(length));
    const auto data_crc =
        static_cast<std::uint32_t>(LoadLittleEndian(bytes.substr(offset + kHeaderSize + data.size(), 4)));
    if (crc32c::Unmask(data_crc) != crc32c::Value(data)) {
      fail("data CRC mismatch (stored " + Hex32(crc32c::Unmask(data_crc)) + ", computed " + Hex32(crc32c::Value(data)) +
           ")");
    }
    try {
      events.push_back(DecodeEvent(data));
    } catch (const DecodeError& error) {
      fail("not an Event protobuf: " + error.message);
    }
    offset += kHeaderSize + data.size() + kFooterSize;
  }
  return events;
}

}  // namespace dltune
