/*
 * output.h: mcclctl's command table.  Each command is one row: its name on
 * the command line, the control request it sends, the shape its reply must
 * have, and two renderers, text and JSON (bgpctl's struct output).  Adding a
 * command is one row in output.c plus its schema and renderers.
 */
#ifndef MCCLCTL_OUTPUT_H
#define MCCLCTL_OUTPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

/* The types a reply's value may have; see struct field. */
enum field_type { T_STR, T_UINT, T_BOOL, T_LIST, T_OBJ, T_NUM };

#define F_NULL		0x1	/* the value may be null */
#define F_OPT		0x2	/* the key may be absent */

/*
 * One key of a reply object.  mcclctl checks every reply against its
 * command's schema before rendering it, so a renderer never meets a missing
 * key or a value of the wrong type, and -j promises the same keys as text.
 */
struct field {
	const char		*key;		/* NULL ends a list of fields */
	enum field_type		 type;		/* T_UINT: an integer >= 0;
						   T_NUM: any number >= 0 */
	int			 flags;
	enum field_type		 elem;		/* T_LIST: its elements' type */
	const struct field	*sub;		/* T_OBJ, T_LIST of T_OBJ: keys */
};

/* Renderers cannot fail: the reply has passed its schema. */
typedef void	 render_fn(FILE *, const json_t *);

struct command {
	const char		*name;		/* NULL ends the table */
	uint32_t		 cmd;		/* enum ctl_cmd */
	const char		*arg;		/* usage name of its argument, or NULL */
	const struct field	*schema;	/* keys of the reply's top object */
	render_fn		*text;
	render_fn		*json;
	int			 stream;	/* replies until the daemon goes */
	const char		*option;	/* the long option that picks this
						   row of the name (sent as the
						   argument), or NULL */
	int			 wait_ms;	/* for the answer, when no -t;
						   0: the default */
};

/* output.c */
extern const struct command	 commands[];
const struct command	*command_find(const char *, const char *);
int			 reply_check(const json_t *, const struct field *,
			    char *, size_t);
void			 output_clean(char *, size_t, const char *, size_t);

#endif
