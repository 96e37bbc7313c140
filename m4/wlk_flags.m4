# SPDX-License-Identifier: MIT
# WLK_PROBE_CFLAGS(VAR, FLAGS...) - append to VAR each flag of FLAGS that the
# C compiler accepts without a warning (probed with -Werror, so a flag an
# older compiler merely warns about is dropped instead of polluting builds).
AC_DEFUN([WLK_PROBE_CFLAGS], [
  for wlk_flag in m4_normalize([$2]); do
    AS_VAR_PUSHDEF([wlk_cache], [wlk_cv_cflag_$wlk_flag])
    AC_CACHE_CHECK([whether $CC accepts $wlk_flag], [wlk_cache], [
      wlk_save_CFLAGS=$CFLAGS
      CFLAGS="$CFLAGS -Werror $wlk_flag"
      AC_COMPILE_IFELSE([AC_LANG_PROGRAM([], [])],
        [AS_VAR_SET([wlk_cache], [yes])], [AS_VAR_SET([wlk_cache], [no])])
      CFLAGS=$wlk_save_CFLAGS])
    AS_VAR_IF([wlk_cache], [yes], [$1="$$1 $wlk_flag"])
    AS_VAR_POPDEF([wlk_cache])
  done
])

# WLK_PROBE_LDFLAG(VAR, FLAG) - append FLAG to VAR if the linker accepts it.
AC_DEFUN([WLK_PROBE_LDFLAG], [
  AC_MSG_CHECKING([whether the linker accepts $2])
  wlk_save_LDFLAGS=$LDFLAGS
  LDFLAGS="$LDFLAGS $2"
  AC_LINK_IFELSE([AC_LANG_PROGRAM([], [])],
    [AC_MSG_RESULT([yes]); $1="$$1 $2"], [AC_MSG_RESULT([no])])
  LDFLAGS=$wlk_save_LDFLAGS
])
