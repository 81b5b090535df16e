package canalbridge.spark;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.iceberg.CatalogProperties;
import org.apache.iceberg.CatalogUtil;
import org.apache.iceberg.catalog.TableCommit;
import org.apache.iceberg.rest.RESTCatalog;
import org.apache.spark.sql.SparkSession;
import scala.collection.JavaConverters;

/**
 * Several tables' staged changes published as one commit of an Iceberg REST catalog
 * ({@code POST /v1/{prefix}/transactions/commit}): the catalog applies every table's change or
 * none. Whether it applies them at one instant, so that no reader sees some tables moved and
 * not the others, is the server's: Nessie does (one Nessie commit).
 *
 * <p>Spark's Iceberg catalog wraps the REST client in a cache that hides its multi-table commit,
 * so this builds the catalog's own client from the same Spark settings, once per catalog and
 * settings.
 */
public final class CatalogTransaction {
  private static final String PREFIX = "spark.sql.catalog.";
  private static final Map<String, RESTCatalog> CLIENTS = new ConcurrentHashMap<>();
  private static final String CONNECT_TIMEOUT = "rest.client.connection-timeout-ms";
  private static final String SOCKET_TIMEOUT = "rest.client.socket-timeout-ms";

  private CatalogTransaction() {}

  /**
   * Why {@code catalog} (a Spark catalog name) cannot publish several tables at once, or null
   * when it can: it must be an Iceberg REST catalog.
   */
  public static String unsupported(SparkSession spark, String catalog) {
    return unsupported(catalog, settings(spark, catalog));
  }

  private static String unsupported(String catalog, Map<String, String> settings) {
    if (settings.isEmpty()) {
      return "no Spark catalog " + catalog + " is configured";
    }
    String type = settings.getOrDefault(CatalogUtil.ICEBERG_CATALOG_TYPE, "");
    String impl = settings.getOrDefault(CatalogProperties.CATALOG_IMPL, "");
    if (!type.equals(CatalogUtil.ICEBERG_CATALOG_TYPE_REST) && !impl.equals(RESTCatalog.class.getName())) {
      return "it is not an Iceberg REST catalog (type " + (type.isEmpty() ? impl : type) + ")";
    }
    return null;
  }

  /**
   * Publish {@code staged}, every one in the same catalog, in one request. Raises what Iceberg's
   * REST client raises: {@code CommitFailedException} when the catalog refused the commit (a
   * table moved since its change was staged), {@code CommitStateUnknownException} when it
   * cannot tell, others when the request failed on the way. {@code hadoopConf} is Spark's Hadoop
   * configuration, which the catalog's client is built with; it waits at most {@code timeoutMs} to
   * connect and for each reply, unless the catalog's settings give their own time-outs.
   */
  public static void publish(SparkSession spark, Object hadoopConf, List<StagedDelta> staged, int timeoutMs) {
    if (staged.isEmpty()) {
      return;
    }
    String catalog = staged.get(0).catalog();
    List<TableCommit> commits = new ArrayList<>();
    for (StagedDelta each : staged) {
      if (!each.catalog().equals(catalog)) {
        throw new IllegalArgumentException("canalbridge: one commit cannot span catalogs " + catalog
            + " and " + each.catalog() + " (" + each.target() + ")");
      }
      commits.add(each.tableCommit());
    }
    client(spark, hadoopConf, catalog, timeoutMs).commitTransaction(commits);
  }

  private static RESTCatalog client(SparkSession spark, Object hadoopConf, String catalog, int timeoutMs) {
    Map<String, String> settings = settings(spark, catalog);
    String why = unsupported(catalog, settings);
    if (why != null) {
      throw new IllegalArgumentException(
          "canalbridge: catalog " + catalog + " cannot commit several tables at once: " + why);
    }
    // (Without them the HTTP client could wait for ever on a catalog that stopped answering.)
    settings.putIfAbsent(CONNECT_TIMEOUT, String.valueOf(timeoutMs));
    settings.putIfAbsent(SOCKET_TIMEOUT, String.valueOf(timeoutMs));
    // One client per catalog and settings, never closed: jobs whose settings differ (their time-outs) each
    // keep their own, and none is closed under another's request.
    return CLIENTS.computeIfAbsent(catalog + "\n" + settings, key ->
        (RESTCatalog) CatalogUtil.buildIcebergCatalog(catalog, settings, hadoopConf));
  }

  /** The catalog's Spark settings without their prefix, as Spark's Iceberg catalog receives them. */
  private static Map<String, String> settings(SparkSession spark, String catalog) {
    String prefix = PREFIX + catalog + ".";
    Map<String, String> settings = new TreeMap<>();
    Map<String, String> all = JavaConverters.mapAsJavaMapConverter(spark.conf().getAll()).asJava();
    all.forEach((key, value) -> {
      if (key.startsWith(prefix)) {
        settings.put(key.substring(prefix.length()), value);
      }
    });
    return settings;
  }
}
