/// The environment `kc exec` gives a command: how an item's name becomes a variable's,
/// and the variables an item may not set. Rules of both programs: the full kc
/// (Sources/KCIntegrations/EnvironmentNames.swift) and the front, which serves `kc exec
/// --env` of one's own services.
public enum ExecEnvironment {
    /// `db.password` -> `DB_PASSWORD`: ASCII letters upper-cased, digits kept, any other
    /// byte `_` (each well-formed UTF-8 sequence one `_`, as one character), and a leading
    /// digit gets a `_` in front (names cannot start with one). Nil for a name that is not
    /// well-formed UTF-8 (the full kc names those from their decoded text).
    public static func variableName(forItem item: UnsafeRawBufferPointer) -> [UInt8]? {
        var name: [UInt8] = []
        name.reserveCapacity(item.count + 1)
        var index = 0
        while index < item.count {
            let byte = item[index]
            let length = NameRules.wellFormedUTF8Length(item, at: index)
            guard length > 0 else { return nil }
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"): name.append(byte - 0x20)
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): name.append(byte)
            default: name.append(UInt8(ascii: "_"))
            }
            index += length
        }
        if let first = name.first, first >= UInt8(ascii: "0") && first <= UInt8(ascii: "9") { name.insert(UInt8(ascii: "_"), at: 0) }
        return name
    }

    /// Whether a variable of this name changes what programs load, run or trust
    /// (``dangerousPatterns``), compared upper-cased: programs read `http_proxy` as well as
    /// `HTTP_PROXY`.
    public static func isDangerous(_ name: UnsafeRawBufferPointer) -> Bool {
        var upper: [UInt8] = []
        upper.reserveCapacity(name.count)
        for byte in name { upper.append(byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z") ? byte - 0x20 : byte) }
        return dangerousPatterns.contains { pattern in
            let text = staticBytes(pattern)
            if text.last == UInt8(ascii: "*") { return upper.starts(with: text.dropLast()) }
            return upper.elementsEqual(text)
        }
    }

    /// Variables that make programs load or run something, or trust or talk to something
    /// else, in kc's name; a trailing `*` covers every name with that start. No deny list
    /// can name them all, so values others choose reach a command only through names the
    /// caller chose (`--var`).
    public static let dangerousPatterns: [StaticString] = [
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
}
