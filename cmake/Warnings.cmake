# Project-wide warning flags, applied per target through smolbox_warnings().
function(smolbox_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow
    -Wnon-virtual-dtor -Wcast-align -Wunused -Woverloaded-virtual
    -Wformat=2 -Wimplicit-fallthrough)
  if(SMOLBOX_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
