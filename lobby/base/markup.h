// Text made safe inside HTML and XML, in element content and in quoted attribute values
// alike: & < > " ' escaped (' as &#39;, which both read), and the C0 control characters that
// XML 1.0 cannot carry at all (all but tab, newline and carriage return) left out. The one
// escaper of warren's pages (the web proxy's, the OAuth sign-in page) and libvirt's domain
// XML. Pure; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace warren {

std::string MarkupEscape(std::string_view text);

}  // namespace warren
