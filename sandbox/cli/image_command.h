// smolbox image import / ls / rm: the local image store from the command line.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace smolbox::cli {

struct ImageFlags {
  std::string source;
  std::string name;
  std::string max_size;
  std::string max_files;
  std::vector<std::string> references;
  bool json = false;
};

// Adds `image` and its three subcommands to app; RunImageCommand runs whichever was given.
CLI::App* AddImageCommand(CLI::App& app, ImageFlags& flags);
int RunImageCommand(const CLI::App& image, const ImageFlags& flags);

}  // namespace smolbox::cli
