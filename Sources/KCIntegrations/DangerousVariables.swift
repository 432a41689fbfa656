/// The environment variables `kc exec --env` will not set from an item unless the
/// caller allows each by name (`--allow-env NAME`, only for their own services).
///
/// Each makes the command, or a program it starts, load code, run a command, or trust
/// or look up files somewhere else: an item named `ld.preload` in a service someone
/// shares with you would otherwise preload their library into your command. The list
/// is glibc's `UNSECURE_ENVVARS` (sysdeps/generic/unsecvars.h, what the loader removes
/// for setuid programs), sudo's `env_delete` defaults (plugins/sudoers/env.c), and the
/// variables of the same kind that git, the JVM, Node and TLS libraries read.
/// A pattern ending in `*` matches every name that starts with the rest.
public enum DangerousVariables {
    /// The names and prefixes refused, as `kc exec --help` lists them.
    public static let patterns: [String] = [
        // glibc's loader and libc
        "LD_*", "GCONV_PATH", "GETCONF_DIR", "GLIBC_TUNABLES", "HOSTALIASES", "LOCALDOMAIN",
        "LOCPATH", "MALLOC_*", "NIS_PATH", "NLSPATH", "RESOLV_HOST_CONF", "RES_OPTIONS",
        "TMPDIR", "TZDIR",
        // shells: files they source, commands they run, how they split and trace
        "BASH_ENV", "ENV", "BASH_FUNC_*", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND",
        "IFS", "CDPATH", "GLOBIGNORE", "FPATH", "ZDOTDIR", "NULLCMD", "READNULLCMD", "TMPPREFIX",
        // where programs are found and configuration is read; programs other programs run
        "PATH", "HOME", "XDG_CONFIG_HOME", "SHELL", "EDITOR", "VISUAL", "PAGER",
        // interpreters' module paths and options
        "PYTHON*", "PERL5*", "PERLLIB", "PERLIO_DEBUG", "RUBYOPT", "RUBYLIB",
        "NODE_OPTIONS", "NODE_PATH", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "CLASSPATH",
        // git: commands it runs, and configuration that names more
        "GIT_SSH", "GIT_SSH_COMMAND", "GIT_ASKPASS", "SSH_ASKPASS", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR",
        "GIT_PAGER", "GIT_EXEC_PATH", "GIT_EXTERNAL_DIFF", "GIT_PROXY_COMMAND", "GIT_TEMPLATE_DIR",
        "GIT_DIR", "GIT_CONFIG*",
        // which certificates TLS trusts
        "SSL_CERT_*", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
        // terminal and Kerberos files (sudo's list)
        "TERMINFO", "TERMINFO_DIRS", "TERMCAP", "TERMPATH", "KRB5_CONFIG*", "KRB5_KTNAME",
    ]

    /// Whether `name` (an environment name kc made: upper case, digits and `_`) is one.
    public static func contains(_ name: String) -> Bool {
        patterns.contains { pattern in
            pattern.hasSuffix("*") ? name.hasPrefix(pattern.dropLast()) : name == pattern
        }
    }
}
