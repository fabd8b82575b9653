// The group of one process: every collective is a copy (or nothing).
#pragma once

#include <memory>
#include <string>

#include "anvil/comm/group.h"

namespace anvil::comm {

class LocalGroup final : public Group {
 public:
  explicit LocalGroup(std::string name) : Group(0, 1, std::move(name), {0}) {}
  std::unique_ptr<Group> Split(int color, int key, const std::string& name) override;
  Handle Start(Request request) override;
};

}  // namespace anvil::comm
