/// The environment variables `kc exec` will not set from an item unless the caller
/// allows each by name (`--allow-env NAME`, only for their own services).
///
/// Each makes the command, or a program it starts, load code, run a command, or trust
/// or look up files somewhere else: an item named `ld.preload` in a service someone
/// shares with you would otherwise preload their library into your command. The list
/// is glibc's `UNSECURE_ENVVARS` (sysdeps/generic/unsecvars.h, what the loader removes
/// for setuid programs), sudo's `env_delete` defaults (plugins/sudoers/env.c), and the
/// variables of the same kind that git, interpreters, toolchains, pagers, editors, TLS
/// libraries and cloud tools read. No such list is complete, which is why items of a
/// service another user shares become only variables the caller names (`--var`).
/// A pattern ending in `*` matches every name that starts with the rest.
public enum DangerousVariables {
    /// The names and prefixes refused, as `kc exec --help` lists them.
    public static let patterns: [String] = [
        // glibc's loader and libc
        "LD_*", "GCONV_PATH", "GETCONF_DIR", "GLIBC_TUNABLES", "HOSTALIASES", "LOCALDOMAIN",
        "LOCPATH", "MALLOC_*", "NIS_PATH", "NLSPATH", "RESOLV_HOST_CONF", "RES_OPTIONS",
        "TMPDIR", "TZDIR",
        // shells: files they source, commands they run, how they split and trace
        "BASH_ENV", "ENV", "BASH_FUNC_*", "BASH_LOADABLES_PATH", "SHELLOPTS", "BASHOPTS",
        "PS0", "PS1", "PS2", "PS3", "PS4", "PROMPT_COMMAND", "IFS", "CDPATH", "GLOBIGNORE",
        "FPATH", "ZDOTDIR", "NULLCMD", "READNULLCMD", "TMPPREFIX", "INPUTRC", "HISTFILE",
        // where programs are found and configuration is read; programs other programs run
        "PATH", "HOME", "XDG_*", "SHELL", "EDITOR", "VISUAL", "PAGER", "BROWSER",
        "MANPAGER", "MANOPT", "LESS", "LESSOPEN", "LESSCLOSE", "LESSKEY*", "SYSTEMD_*",
        "SUDO_ASKPASS", "SUDO_EDITOR", "VIMINIT", "GVIMINIT", "EXINIT", "MYVIMRC", "MYGVIMRC",
        "VIMRUNTIME", "EMACSLOADPATH", "KC_*", "FCEDIT", "KUBE_EDITOR", "GH_PAGER", "GH_EDITOR",
        "PSQLRC", "PSQL_PAGER", "PSQL_EDITOR", "HGRCPATH", "HGEDITOR", "IRBRC",
        // build tools and the commands they run; remote shells of copy tools
        "MAKEFLAGS", "MAKEFILES", "MFLAGS", "GNUMAKEFLAGS", "CC", "CXX", "CPP", "TAR_OPTIONS",
        "RSYNC_RSH", "RSYNC_CONNECT_PROG", "CVS_RSH", "SVN_SSH", "MAVEN_OPTS", "GRADLE_OPTS",
        "JAVA_HOME", "JAVA_OPTS", "JDK_*", "CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "LIBRARY_PATH", "CPATH",
        "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "PKG_CONFIG_PATH", "PKG_CONFIG_LIBDIR", "YARN_*", "KUBECTL_EXTERNAL_DIFF",
        "FZF_DEFAULT_COMMAND", "AWS_CA_BUNDLE", "CLOUDSDK_PYTHON", "CONTAINER_HOST", "CONTAINERS_*", "TF_CLI_CONFIG_FILE", "ANSIBLE_*",
        // interpreters' and toolchains' module paths, options and start-up code
        "PYTHON*", "PERL5*", "PERLLIB", "PERLIO_DEBUG", "RUBY*", "GEM_HOME", "GEM_PATH",
        "BUNDLE_GEMFILE", "NODE_OPTIONS", "NODE_PATH", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS",
        "JDK_JAVA_OPTIONS", "CLASSPATH", "LUA_*", "PHPRC", "PHP_INI_SCAN_DIR", "TCLLIBPATH",
        "R_LIBS*", "R_PROFILE*", "R_ENVIRON*", "JULIA_*", "DOTNET_*", "CORECLR_*", "COMPLUS_*",
        "ERL_*", "GOFLAGS", "GOPROXY", "GOTOOLCHAIN", "GOROOT", "GOPATH", "GOENV", "GOSUMDB",
        "GONOSUMDB", "GOINSECURE", "GOPRIVATE", "CARGO_HOME", "CARGO_BUILD_*", "CARGO_TARGET_*",
        "RUSTC*", "RUSTDOC*", "RUSTUP_*", "NPM_CONFIG_*", "PIP_*", "VIRTUAL_ENV",
        // libraries that load plugins named by the environment
        "GTK_*", "GDK_*", "GIO_*", "GST_PLUGIN*", "QT_*", "VK_*", "LIBVA_*", "SASL_PATH",
        // git: commands it runs, configuration that names more, files it writes to
        "GIT_SSH", "GIT_SSH_COMMAND", "GIT_ASKPASS", "SSH_ASKPASS*", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR",
        "GIT_PAGER", "GIT_EXEC_PATH", "GIT_EXTERNAL_DIFF", "GIT_PROXY_COMMAND", "GIT_TEMPLATE_DIR",
        "GIT_DIR", "GIT_COMMON_DIR", "GIT_CONFIG*", "GIT_TRACE*", "GIT_SSL_NO_VERIFY", "GIT_SSL_CAINFO", "GIT_SSL_CAPATH",
        // configuration files with commands or modules in them; where tools find credentials
        "OPENSSL_*", "GNUTLS_*", "WGETRC", "CURL_HOME", "NETRC", "SSLKEYLOGFILE", "AWS_CONFIG_FILE",
        "AWS_SHARED_CREDENTIALS_FILE", "KUBECONFIG", "DOCKER_CONFIG", "DOCKER_HOST", "BOTO_CONFIG",
        "CLOUDSDK_CONFIG", "GNUPGHOME", "CREDENTIALS_DIRECTORY",
        // sockets and servers the command would talk to in your name
        "SSH_AUTH_SOCK", "GPG_AGENT_INFO", "DBUS_SESSION_BUS_ADDRESS", "DISPLAY", "WAYLAND_DISPLAY",
        "XAUTHORITY", "NOTIFY_SOCKET", "LISTEN_*", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
        "FTP_PROXY", "NO_PROXY",
        // which certificates TLS trusts
        "SSL_CERT_*", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "NODE_TLS_REJECT_UNAUTHORIZED",
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
