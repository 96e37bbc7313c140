/* SPDX-License-Identifier: MIT */
/* t_errors.c - error codes, wlk_strerror() and wlk_error_name(). */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "../common.h"

struct t_err {
	const char *sym;
	int value;
	const char *dom;
	const char *msg;
};

static const struct t_err t_errs[] = {
#define T_ERR(name, value, dom, msg) { "WLK_" #name, WLK_##name, dom, msg },
	WLK_ERRNO_MAP(T_ERR)
#undef T_ERR
};

#define T_NERRS (sizeof(t_errs) / sizeof(t_errs[0]))

Test(errors, table_has_every_documented_code, T_FIX, .timeout = 10)
{
	static const int want[] = {
		WLK_EINVAL, WLK_ENAMETOOLONG, WLK_ETIMEDOUT, WLK_ENOTSUPPORTED,
		WLK_EABORTED, WLK_ESTOLEN, WLK_ESTATE, WLK_ESECURITY,
		WLK_EFULL, WLK_ECORRUPT, WLK_EFORMAT, WLK_EDEADLK,
	};
	size_t i, j;

	cr_assert_eq(T_NERRS, sizeof(want) / sizeof(want[0]));
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		bool found = false;

		for (j = 0; j < T_NERRS; j++)
			found |= t_errs[j].value == want[i];
		cr_assert(found, "code %d missing from WLK_ERRNO_MAP", want[i]);
	}
}

Test(errors, codes_are_negative_and_distinct, T_FIX, .timeout = 10)
{
	size_t i, j;

	for (i = 0; i < T_NERRS; i++) {
		cr_assert_lt(t_errs[i].value, 0, "%s is not negative",
			     t_errs[i].sym);
		for (j = i + 1; j < T_NERRS; j++)
			cr_assert_neq(t_errs[i].value, t_errs[j].value,
				      "%s and %s share a value", t_errs[i].sym,
				      t_errs[j].sym);
	}
}

Test(errors, errno_valued_codes_equal_negated_errno, T_FIX, .timeout = 10)
{
	cr_assert_eq(WLK_EINVAL, -EINVAL);
	cr_assert_eq(WLK_ENAMETOOLONG, -ENAMETOOLONG);
	cr_assert_eq(WLK_ETIMEDOUT, -ETIMEDOUT);
}

Test(errors, every_code_has_its_table_message, T_FIX, .timeout = 10)
{
	size_t i;

	for (i = 0; i < T_NERRS; i++) {
		const char *s = wlk_strerror(t_errs[i].value);

		cr_assert_not_null(s, "wlk_strerror(%s) is NULL",
				   t_errs[i].sym);
		cr_assert_str_eq(s, t_errs[i].msg, "wlk_strerror(%s)",
				 t_errs[i].sym);
		cr_assert_str_neq(s, "unknown error", "%s", t_errs[i].sym);
	}
}

Test(errors, every_code_has_a_name, T_FIX, .timeout = 10)
{
	size_t i;

	for (i = 0; i < T_NERRS; i++) {
		const char *n = wlk_error_name(t_errs[i].value);

		cr_assert_not_null(n, "wlk_error_name(%s) is NULL",
				   t_errs[i].sym);
		cr_assert_str_neq(n, "UnknownError", "%s", t_errs[i].sym);
		cr_assert_str_neq(n, "", "%s", t_errs[i].sym);
		if (t_errs[i].dom)
			cr_assert_str_eq(n, t_errs[i].dom, "wlk_error_name(%s)",
					 t_errs[i].sym);
	}
}

Test(errors, domexception_names_as_documented, T_FIX, .timeout = 10)
{
	cr_assert_str_eq(wlk_error_name(WLK_EINVAL), "TypeError");
	cr_assert_str_eq(wlk_error_name(WLK_ETIMEDOUT), "TimeoutError");
	cr_assert_str_eq(wlk_error_name(WLK_ENOTSUPPORTED),
			 "NotSupportedError");
	cr_assert_str_eq(wlk_error_name(WLK_EABORTED), "AbortError");
	cr_assert_str_eq(wlk_error_name(WLK_ESTOLEN), "AbortError");
	cr_assert_str_eq(wlk_error_name(WLK_ESTATE), "InvalidStateError");
	cr_assert_str_eq(wlk_error_name(WLK_ESECURITY), "SecurityError");
	cr_assert_str_eq(wlk_error_name(WLK_EFULL), "QuotaExceededError");
}

Test(errors, codes_without_domexception_are_named_by_symbol, T_FIX,
     .timeout = 10)
{
	const char *n = wlk_error_name(WLK_ENAMETOOLONG);

	cr_assert_str_eq(wlk_error_name(WLK_ECORRUPT), "WLK_ECORRUPT");
	cr_assert_str_eq(wlk_error_name(WLK_EFORMAT), "WLK_EFORMAT");
	/* Its value is also -ENAMETOOLONG, so either symbol names it. */
	cr_assert(strcmp(n, "WLK_ENAMETOOLONG") == 0 ||
			  strcmp(n, "ENAMETOOLONG") == 0,
		  "wlk_error_name(WLK_ENAMETOOLONG) = %s", n);
}

Test(errors, negated_errno_values_are_named_by_symbol, T_FIX, .timeout = 10)
{
	static const struct {
		int err;
		const char *name;
	} e[] = {
		{ -ENOMEM, "ENOMEM" }, { -ENOENT, "ENOENT" },
		{ -EBUSY, "EBUSY" },   { -ENOSPC, "ENOSPC" },
		{ -EMFILE, "EMFILE" }, { -EACCES, "EACCES" },
	};
	size_t i;

	for (i = 0; i < sizeof(e) / sizeof(e[0]); i++) {
		const char *s = wlk_strerror(e[i].err);
		const char *n = wlk_error_name(e[i].err);

		cr_assert_not_null(s);
		cr_assert_not_null(n);
		cr_assert_str_eq(n, e[i].name, "wlk_error_name(%d)", e[i].err);
		cr_assert_str_neq(s, "", "wlk_strerror(%d)", e[i].err);
		cr_assert_str_neq(s, "unknown error", "wlk_strerror(%s)",
				  e[i].name);
	}
}

Test(errors, unknown_codes_are_reported_as_unknown, T_FIX, .timeout = 10)
{
	static const int unknown[] = { -2999,   -3000, -3009, -3100,
				       -100000, INT_MIN, 123456 };
	size_t i;

	for (i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		const char *s = wlk_strerror(unknown[i]);
		const char *n = wlk_error_name(unknown[i]);

		cr_assert_not_null(s);
		cr_assert_not_null(n);
		cr_assert_str_eq(s, "unknown error", "wlk_strerror(%d)",
				 unknown[i]);
		cr_assert_str_eq(n, "UnknownError", "wlk_error_name(%d)",
				 unknown[i]);
	}
}

Test(errors, strings_are_static, T_FIX, .timeout = 10)
{
	const char *a = wlk_strerror(WLK_EFULL);
	const char *b = wlk_error_name(WLK_EFULL);

	(void)wlk_strerror(WLK_ESTATE);
	(void)wlk_error_name(-ENOMEM);
	cr_assert_str_eq(a, "a table of the bucket's segment is full");
	cr_assert_str_eq(b, "QuotaExceededError");
	cr_assert_eq(wlk_strerror(WLK_EFULL), a);
}
