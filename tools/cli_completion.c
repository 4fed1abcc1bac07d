/* `nabla completion bash|zsh` and `nabla manpage`: shell completion scripts and the manual page,
   made from the command's own --help texts (the program runs itself with --help and with each
   subcommand's --help), so they list what the parsers accept without a second list to keep. */
#include "cli_completion.h"
#include <nabla.h>
#include <ctype.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { MAX_CMDS = 48, MAX_OPTS = 64 };

typedef struct {
    char name[32];
    char desc[160];   /* the main help's text beside the command */
    char choices[96]; /* "bash zsh" when the usage line shows NAME a|b */
    char *help;       /* its --help text (malloc'ed) */
    char opts[MAX_OPTS][40];
    int nopts;
} command;

/* What `nabla ARG [--help]` writes on stdout (malloc'ed), or NULL. Its stderr is dropped: a
   sanitizer's report there is not help text. */
static char *run_self(const char *arg, bool help) {
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return NULL;
    exe[n] = 0;
    int fd[2];
    if (pipe(fd) < 0) return NULL;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return NULL;
    }
    if (pid == 0) {
        dup2(fd[1], STDOUT_FILENO);
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, STDERR_FILENO);
        close(fd[0]);
        close(fd[1]);
        char *argv[] = { exe, (char *)arg, help ? "--help" : NULL, NULL };
        execv(exe, argv);
        _exit(127);
    }
    close(fd[1]);
    size_t cap = 4096, len = 0;
    char *text = malloc(cap);
    ssize_t r;
    while (text && (r = read(fd[0], text + len, cap - len - 1)) > 0) {
        len += (size_t)r;
        if (cap - len < 2) {
            char *grown = realloc(text, cap * 2);
            if (!grown) {
                free(text);
                text = NULL;
                break;
            }
            text = grown;
            cap *= 2;
        }
    }
    close(fd[0]);
    waitpid(pid, NULL, 0);
    if (text) text[len] = 0;
    return text;
}

/* The options a help text names: -x and --long-name words, each once, in order of appearance. */
static void find_opts(command *c) {
    const char *t = c->help;
    for (size_t i = 0; t[i]; i++) {
        if (t[i] != '-' || (i > 0 && !strchr(" [(|,\n", t[i - 1]))) continue;
        size_t j = i + 1 + (t[i + 1] == '-');
        if (!isalpha((unsigned char)t[j])) continue;
        size_t k = j;
        while (isalnum((unsigned char)t[k]) || t[k] == '-') k++;
        if (t[i + 1] != '-') {
            /* -o: one letter, opening a line's text or after [ ( |, not prose ("mpirun -n N") */
            size_t b = i;
            while (b > 0 && t[b - 1] == ' ') b--;
            if (k - j != 1 || !(b == 0 || strchr("\n[(|", t[b - 1]) || (i > 0 && strchr("[(|", t[i - 1])))) continue;
        }
        size_t len = k - i;
        if (len >= sizeof c->opts[0]) continue;
        bool seen = false;
        for (int o = 0; o < c->nopts && !seen; o++) seen = strlen(c->opts[o]) == len && !strncmp(c->opts[o], t + i, len);
        if (!seen && c->nopts < MAX_OPTS) {
            memcpy(c->opts[c->nopts], t + i, len);
            c->opts[c->nopts++][len] = 0;
        }
        i = k - 1;
    }
}

/* The subcommands the main --help lists ("  NAME ARGS   description"), each with its --help. */
static int read_commands(command *cmds, char **main_help) {
    char *top = run_self("--help", false);
    if (!top) return -1;
    int n = 0;
    for (char *line = top; *line && n < MAX_CMDS;) {
        char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (len > 2 && line[0] == ' ' && line[1] == ' ' && islower((unsigned char)line[2])) {
            command *c = &cmds[n];
            memset(c, 0, sizeof *c);
            size_t k = 2;
            while (k < len && (islower((unsigned char)line[k]) || line[k] == '-') && k - 2 < sizeof c->name - 1) k++;
            memcpy(c->name, line + 2, k - 2);
            /* the first column ends at a run of two spaces; the description follows */
            size_t d = k;
            while (d + 1 < len && !(line[d] == ' ' && line[d + 1] == ' ')) d++;
            /* NAME a|b: the first argument's choices */
            bool words = k < d && line[k] == ' ' && memchr(line + k + 1, '|', d - k - 1);
            for (size_t q = k + 1; words && q < d; q++) words = islower((unsigned char)line[q]) || line[q] == '|';
            if (words) {
                size_t m = d - k - 1 < sizeof c->choices - 1 ? d - k - 1 : sizeof c->choices - 1;
                memcpy(c->choices, line + k + 1, m);
                for (char *p = c->choices; *p; p++)
                    if (*p == '|') *p = ' ';
            }
            while (d < len && line[d] == ' ') d++;
            snprintf(c->desc, sizeof c->desc, "%.*s", (int)(len - d), line + d);
            c->help = run_self(c->name, true);
            if (c->help) {
                find_opts(c);
                n++;
            }
        }
        line += len + (end != NULL);
    }
    *main_help = top;
    return n;
}

static void free_commands(command *cmds, int n, char *main_help) {
    for (int i = 0; i < n; i++) free(cmds[i].help);
    free(main_help);
}

static void print_bash(const command *cmds, int n) {
    printf("# bash completion for nabla %s (`nabla completion bash`, made from its --help texts)\n", nb_version());
    printf("_nabla() {\n    local cur=${COMP_WORDS[COMP_CWORD]} words=\n");
    printf("    if [ \"$COMP_CWORD\" -eq 1 ]; then\n        words=\"");
    for (int i = 0; i < n; i++) printf("%s%s", i ? " " : "", cmds[i].name);
    printf(" --help --version\"\n    else\n        case ${COMP_WORDS[1]} in\n");
    for (int i = 0; i < n; i++) {
        printf("        %s)", cmds[i].name);
        if (cmds[i].choices[0])
            printf(" if [ \"$COMP_CWORD\" -eq 2 ]; then COMPREPLY=($(compgen -W \"%s\" -- \"$cur\")); return; fi;",
                   cmds[i].choices);
        printf(" words=\"");
        for (int o = 0; o < cmds[i].nopts; o++) printf("%s%s", o ? " " : "", cmds[i].opts[o]);
        printf("\" ;;\n");
    }
    printf("        esac\n        # an argument that is not an option: the default completion (file names)\n");
    printf("        [[ $cur == -* ]] || return 0\n    fi\n");
    printf("    COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n}\n");
    printf("complete -o bashdefault -o default -F _nabla nabla\n");
}

/* s with zsh's _describe separator (':') and quotes escaped, single-quoted. */
static void zsh_quoted(const char *s) {
    putchar('\'');
    for (; *s; s++) {
        if (*s == '\'') fputs("'\\''", stdout);
        else if (*s == ':') fputs("\\:", stdout);
        else putchar(*s);
    }
    putchar('\'');
}

static void print_zsh(const command *cmds, int n) {
    printf("#compdef nabla\n# zsh completion for nabla %s (`nabla completion zsh`, made from its --help texts)\n", nb_version());
    printf("_nabla() {\n  local -a cmds opts\n  cmds=(\n");
    for (int i = 0; i < n; i++) {
        /* the name's colon separates; only the description's are escaped */
        printf("    '%s:", cmds[i].name);
        for (const char *p = cmds[i].desc; *p; p++) {
            if (*p == '\'') fputs("'\\''", stdout);
            else if (*p == ':') fputs("\\:", stdout);
            else putchar(*p);
        }
        printf("'\n");
    }
    printf("  )\n  if (( CURRENT == 2 )); then\n    _describe -t commands 'nabla command' cmds\n    return\n  fi\n");
    printf("  case ${words[2]} in\n");
    for (int i = 0; i < n; i++) {
        printf("    %s)", cmds[i].name);
        if (cmds[i].choices[0]) printf(" if (( CURRENT == 3 )); then compadd %s; return; fi;", cmds[i].choices);
        printf(" opts=(");
        for (int o = 0; o < cmds[i].nopts; o++) {
            if (o) putchar(' ');
            zsh_quoted(cmds[i].opts[o]);
        }
        printf(") ;;\n");
    }
    printf("  esac\n  if [[ ${words[CURRENT]} == -* ]]; then compadd -a opts; else _files; fi\n}\n");
    printf("_nabla \"$@\"\n");
}

/* text as troff: backslashes and hyphens escaped, a leading '.' or '\'' guarded. */
static void troff_text(const char *t) {
    bool bol = true;
    for (; *t; t++) {
        if (bol && (*t == '.' || *t == '\'')) fputs("\\&", stdout);
        if (*t == '\\') fputs("\\e", stdout);
        else if (*t == '-') fputs("\\-", stdout);
        else putchar(*t);
        bol = *t == '\n';
    }
    if (!bol) putchar('\n');
}

static void print_man(const command *cmds, int n, const char *main_help) {
    printf(".\\\" The nabla manual page, made by `nabla manpage` from the command's --help texts.\n");
    printf(".TH NABLA 1 \"\" \"nabla %s\" \"User Commands\"\n", nb_version());
    printf(".SH NAME\nnabla \\- train, evaluate and run neural networks with the nabla library\n");
    printf(".SH SYNOPSIS\n.B nabla\n.I COMMAND\n.RI [ ARGS ]\n");
    printf(".SH DESCRIPTION\n.nf\n");
    troff_text(main_help);
    printf(".fi\n.SH COMMANDS\n");
    for (int i = 0; i < n; i++) {
        printf(".SS \"nabla %s\"\n", cmds[i].name);
        troff_text(cmds[i].desc);
        printf(".PP\n.nf\n");
        troff_text(cmds[i].help);
        printf(".fi\n");
    }
    printf(".SH ENVIRONMENT\n.TP\n.B NABLA_NUM_THREADS\nthreads for the kernels (else OMP_NUM_THREADS, else the cores)\n"
           ".TP\n.B NABLA_WARN_LEAKS\n1: warn once when the live tensors grow at each of 10 optimizer steps in a row\n"
           ".TP\n.BR HF_HUB_CACHE \", \" HF_HOME\nwhere model names are looked up (the Hugging Face cache; nabla does not download)\n");
    printf(".SH SEE ALSO\nThe README and docs/ of the nabla sources; \\fBnabla\\fR \\fICOMMAND\\fR \\-\\-help.\n");
}

int cli_completion_main(int argc, char **argv) {
    bool man = !strcmp(argv[0], "manpage");
    const char *shell = argc >= 2 ? argv[1] : "";
    if (!man && (argc != 2 || (strcmp(shell, "bash") && strcmp(shell, "zsh")))) {
        bool help = argc == 2 && (!strcmp(shell, "--help") || !strcmp(shell, "-h"));
        fprintf(help ? stdout : stderr,
                "usage: nabla completion bash|zsh\n"
                "  prints a completion script of the subcommands and their options:\n"
                "  source <(nabla completion bash), or save it as ~/.local/share/bash-completion/completions/nabla;\n"
                "  for zsh, save it as _nabla in a folder of $fpath\n");
        return help ? 0 : 2;
    }
    if (man && argc >= 2) {
        bool help = !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h");
        fprintf(help ? stdout : stderr, "usage: nabla manpage   (this command's manual page, as troff for man)\n");
        return help ? 0 : 2;
    }
    command *cmds = calloc(MAX_CMDS, sizeof *cmds);
    char *main_help = NULL;
    int n = cmds ? read_commands(cmds, &main_help) : -1;
    if (n <= 0) {
        fprintf(stderr, "nabla %s: cannot read the command's own --help texts\n", man ? "manpage" : "completion");
        free(cmds);
        return 1;
    }
    if (man) print_man(cmds, n, main_help);
    else if (!strcmp(shell, "bash")) print_bash(cmds, n);
    else print_zsh(cmds, n);
    free_commands(cmds, n, main_help);
    free(cmds);
    return fflush(stdout) == 0 ? 0 : 1;
}
