/// web: the dashboard's page, embedded at build time (web/): what `gossip run --dashboard` and
/// `gossip watch` serve besides /state.json.
#pragma once
#if !defined(GOSSIP_ROOM_WEB)
#error "gossip/web.hpp belongs to room web, which this room does not use (see the room table in meson.build)"
#endif

#include <optional>
#include <string_view>

namespace gossip {

struct WebAsset {
  std::string_view body;
  std::string_view content_type;
};

/// The embedded file served at `path` ("/" is index.html), or nullopt.
std::optional<WebAsset> web_asset(std::string_view path);

}  // namespace gossip
