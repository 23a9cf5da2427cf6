package org.snowflakeid.routing;

import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

/**
 * A node's libpq connect string ({@code host=... port=... dbname=...}, values optionally in
 * single quotes) as a pgjdbc URL and properties. pgjdbc speaks TCP only: a host that is a
 * directory (a unix socket) is refused. Keywords other than host, port and dbname are passed
 * as pgjdbc properties of the same name where pgjdbc has one (user, password, sslmode,
 * sslrootcert, application_name...), and connect_timeout as connectTimeout.
 */
final class Connstr {
    final String url;
    final Properties props = new Properties();

    Connstr(String connstr) {
        Map<String, String> kw = parse(connstr);
        String hosts = kw.remove("host"), ports = kw.remove("port"), db = kw.remove("dbname");
        if (hosts == null || hosts.startsWith("/")) {
            throw new IllegalArgumentException("pgjdbc needs a TCP host in the node's connect string: " + connstr);
        }
        // host=a,b port=1,2: pgjdbc's a:1,b:2 (one port for all when one is given)
        String[] h = hosts.split(","), p = ports == null ? new String[0] : ports.split(",");
        List<String> addrs = new ArrayList<>();
        for (int i = 0; i < h.length; i++) {
            String port = p.length == 0 ? "" : ":" + (p.length == 1 ? p[0] : p[i]);
            addrs.add((h[i].contains(":") ? "[" + h[i] + "]" : h[i]) + port);
        }
        url = "jdbc:postgresql://" + String.join(",", addrs) + "/"
                + (db == null ? "" : URLEncoder.encode(db, StandardCharsets.UTF_8).replace("+", "%20"));
        String timeout = kw.remove("connect_timeout");
        if (timeout != null) {
            props.setProperty("connectTimeout", timeout);
        }
        kw.forEach(props::setProperty);
    }

    /** keyword = value pairs; a value may be single-quoted, with \' and \\ inside. */
    static Map<String, String> parse(String s) {
        Map<String, String> kw = new LinkedHashMap<>();
        int i = 0, n = s.length();
        while (true) {
            while (i < n && Character.isWhitespace(s.charAt(i))) i++;
            if (i == n) return kw;
            int eq = s.indexOf('=', i);
            if (eq < 0) throw new IllegalArgumentException("missing \"=\" after \"" + s.substring(i) + "\" in connect string");
            String key = s.substring(i, eq).trim();
            i = eq + 1;
            while (i < n && Character.isWhitespace(s.charAt(i))) i++;
            StringBuilder v = new StringBuilder();
            if (i < n && s.charAt(i) == '\'') {
                for (i++; i < n && s.charAt(i) != '\''; i++) {
                    if (s.charAt(i) == '\\' && i + 1 < n) i++;
                    v.append(s.charAt(i));
                }
                if (i++ == n) throw new IllegalArgumentException("unterminated quoted value in connect string");
            } else {
                for (; i < n && !Character.isWhitespace(s.charAt(i)); i++) {
                    if (s.charAt(i) == '\\' && i + 1 < n) i++;
                    v.append(s.charAt(i));
                }
            }
            kw.put(key, v.toString());
        }
    }
}
