// An Iceberg REST catalog server for canalbridge's tests: Iceberg's own REST adapter and servlet over a
// JdbcCatalog (SQLite), served by Jetty on one loopback address. Iceberg's RESTCatalogServer binds every
// interface and takes its settings from the environment; the tests want loopback only and a settings
// file they can keep secrets in (mode 0600), so this is the whole server instead.
//
//   java -cp 'lib/*:launcher' CanalBridgeRestCatalog catalog.properties
//
// The file holds rest.port (0: any free port), optionally rest.host (default 127.0.0.1), and every catalog
// property: warehouse, uri (jdbc:sqlite:FILE), io-impl and s3.* for a warehouse in S3. The server prints
// "listening on http://HOST:PORT/" once it serves.

import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.CatalogUtil;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.rest.RESTCatalogAdapter;
import org.apache.iceberg.rest.RESTCatalogServlet;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.servlet.ServletContextHandler;
import org.eclipse.jetty.servlet.ServletHolder;

public final class CanalBridgeRestCatalog {
  private CanalBridgeRestCatalog() {}

  public static void main(String[] args) throws Exception {
    if (args.length != 1) {
      System.err.println("usage: CanalBridgeRestCatalog catalog.properties");
      System.exit(2);
    }
    Properties file = new Properties();
    try (Reader in = Files.newBufferedReader(Paths.get(args[0]), StandardCharsets.UTF_8)) {
      file.load(in);
    }
    Map<String, String> properties = new HashMap<>();
    for (String name : file.stringPropertyNames()) {
      properties.put(name, file.getProperty(name));
    }
    String host = properties.getOrDefault("rest.host", "127.0.0.1");
    int port = Integer.parseInt(properties.getOrDefault("rest.port", "0"));
    properties.remove("rest.host");
    properties.remove("rest.port");
    for (String required : new String[] {"warehouse", "uri"}) {
      if (!properties.containsKey(required)) {
        System.err.println(args[0] + " does not set " + required);
        System.exit(2);
      }
    }
    properties.putIfAbsent("catalog-impl", "org.apache.iceberg.jdbc.JdbcCatalog");
    // Iceberg's Spark catalog asks for views, which only the V1 schema of the JDBC catalog has.
    properties.putIfAbsent("jdbc.schema-version", "V1");
    Catalog backend = CatalogUtil.buildIcebergCatalog("rest_backend", properties, new Configuration());

    ServletContextHandler context = new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
    context.addServlet(new ServletHolder(new RESTCatalogServlet(new RESTCatalogAdapter(backend))), "/*");
    Server server = new Server();
    ServerConnector connector = new ServerConnector(server);
    connector.setHost(host);
    connector.setPort(port);
    server.addConnector(connector);
    server.setHandler(context);
    server.setStopAtShutdown(true);
    server.start();
    System.out.println("listening on http://" + host + ":" + connector.getLocalPort() + "/");
    System.out.flush();
    server.join();
  }
}
