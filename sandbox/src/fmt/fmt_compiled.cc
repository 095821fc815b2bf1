// fmt's compiled half, built once for the whole project. Debian ships fmt as headers and a
// shared libfmt only: the static agent cannot link the shared one, and FMT_HEADER_ONLY would
// compile fmt's formatting core into every translation unit that includes <fmt/format.h>
// (about a quarter of those units' build time). Without FMT_HEADER_ONLY, fmt's headers declare
// that core and this unit defines it: format-inl.h holds the definitions, and the templates
// fmt's headers declare but do not define are instantiated here for the types they are used
// with.
#include <fmt/format-inl.h>

#include <locale>

FMT_BEGIN_NAMESPACE
namespace detail {

template auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;

template locale_ref::locale_ref(const std::locale& loc);
template auto locale_ref::get<std::locale>() const -> std::locale;

template auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template auto thousands_sep_impl(locale_ref) -> thousands_sep_result<wchar_t>;
template auto decimal_point_impl(locale_ref) -> char;
template auto decimal_point_impl(locale_ref) -> wchar_t;

}  // namespace detail
FMT_END_NAMESPACE
