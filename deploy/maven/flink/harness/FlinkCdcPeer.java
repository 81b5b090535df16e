/*
 * The Flink CDC side of canalbridge's peer benchmark (bench/peers.py), written
 * for canalbridge (not taken from Flink or Iceberg).
 *
 * It runs a Flink SQL job in a local MiniCluster: the statements of JOB_SQL
 * (SET options, catalogs and tables, separated by lines holding only ";"), then
 * its INSERT statements as one statement set, so that a single MySQL CDC source
 * can feed every sink. The word ${password} in the SQL is replaced by the
 * environment variable PEER_MYSQL_PASSWORD (quoted for a SQL string), so the
 * password is never on a command line or in a file.
 *
 * Then it watches each Iceberg table (a Hadoop catalog under WAREHOUSE) until a
 * data file holding the sentinel value of KEY_COLUMN is committed to all of
 * them: the value is larger than any other ever written, so a file whose column
 * bounds reach it holds it, and nothing deletes it. It prints one line per event
 * on stdout:
 *
 *   submitting                the job is about to be submitted (the MiniCluster starts with it)
 *   visible SECONDS           the sentinel is in every table, SECONDS after "submitting"
 *
 * then waits for a line on stdin (the benchmark reads this JVM's CPU time
 * first), cancels the job and exits. Any failure ends the JVM with status 1,
 * its stack trace on stderr. Usage:
 *
 *   java [Flink's --add-opens] -Duser.timezone=UTC -cp LIB/*:CLASSES canalbridge.peer.FlinkCdcPeer \
 *       JOB_SQL WAREHOUSE PARALLELISM CHECKPOINT_MS KEY_COLUMN SENTINEL TIMEOUT_S NAMESPACE.TABLE...
 */
package canalbridge.peer;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.HashMap;
import java.util.Map;

import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.table.api.StatementSet;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;
import org.apache.iceberg.FileScanTask;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.Table;
import org.apache.iceberg.catalog.TableIdentifier;
import org.apache.iceberg.expressions.Expressions;
import org.apache.iceberg.hadoop.HadoopCatalog;
import org.apache.iceberg.io.CloseableIterable;

public final class FlinkCdcPeer {
    private static final long POLL_MS = 250;

    private FlinkCdcPeer() {
    }

    public static void main(String[] args) {
        if (args.length < 8) {
            System.err.println("usage: FlinkCdcPeer JOB_SQL WAREHOUSE PARALLELISM CHECKPOINT_MS KEY_COLUMN SENTINEL"
                    + " TIMEOUT_S NAMESPACE.TABLE...");
            System.exit(2);
        }
        try {
            run(args);
        } catch (Throwable t) {
            // The MiniCluster's threads would keep a JVM alive after main ends: a failure must end it.
            t.printStackTrace();
            System.exit(1);
        }
        System.exit(0);
    }

    private static void run(String[] args) throws Exception {
        String password = System.getenv("PEER_MYSQL_PASSWORD");
        if (password == null) {
            throw new IllegalStateException("PEER_MYSQL_PASSWORD is not set");
        }
        String job = new String(Files.readAllBytes(Paths.get(args[0])), StandardCharsets.UTF_8)
                .replace("${password}", password.replace("'", "''"));
        String warehouse = args[1];
        int parallelism = Integer.parseInt(args[2]);
        long checkpointMs = Long.parseLong(args[3]);
        String keyColumn = args[4];
        long sentinel = Long.parseLong(args[5]);
        long timeoutNs = Long.parseLong(args[6]) * 1_000_000_000L;

        StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(parallelism,
                new Configuration());
        env.enableCheckpointing(checkpointMs);
        StreamTableEnvironment tables = StreamTableEnvironment.create(env);
        StatementSet inserts = tables.createStatementSet();
        for (String statement : job.split("\n;\n")) {
            String sql = statement.trim();
            if (sql.isEmpty()) {
                continue;
            }
            if (sql.regionMatches(true, 0, "INSERT", 0, 6)) {
                inserts.addInsertSql(sql);
            } else if (sql.regionMatches(true, 0, "SET ", 0, 4)) {
                String[] pair = sql.substring(4).split("=", 2);
                tables.getConfig().set(unquote(pair[0]), unquote(pair[1]));
            } else {
                tables.executeSql(sql);
            }
        }
        System.err.println(inserts.explain());  // the plan, in the log: one source feeding every sink
        System.out.println("submitting");
        System.out.flush();
        long submitted = System.nanoTime();
        JobClient client = inserts.execute().getJobClient()
                .orElseThrow(() -> new IllegalStateException("the statement set started no job"));

        HadoopCatalog catalog = new HadoopCatalog(new org.apache.hadoop.conf.Configuration(), warehouse);
        Map<TableIdentifier, Table> waiting = new HashMap<>();
        for (int i = 7; i < args.length; i++) {
            TableIdentifier id = TableIdentifier.parse(args[i]);
            waiting.put(id, catalog.loadTable(id));  // created by the job's SQL above
        }
        Map<TableIdentifier, Long> seen = new HashMap<>();  // the last snapshot looked at
        while (!waiting.isEmpty()) {
            if (System.nanoTime() - submitted > timeoutNs) {
                throw new IllegalStateException("the sentinel " + sentinel + " is not in " + waiting.keySet()
                        + " after " + timeoutNs / 1_000_000_000L + " s; job status " + client.getJobStatus().get());
            }
            if (client.getJobStatus().get().isGloballyTerminalState()) {
                client.getJobExecutionResult().get();  // throws the job's failure
                throw new IllegalStateException("the job ended before the sentinel was visible");
            }
            Thread.sleep(POLL_MS);
            waiting.entrySet().removeIf(e -> holdsSentinel(e.getValue(), e.getKey(), keyColumn, sentinel, seen));
        }
        double seconds = (System.nanoTime() - submitted) / 1e9;
        System.out.printf("visible %.3f%n", seconds);
        System.out.flush();
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
        client.cancel().get();
    }

    /** Whether a data file of the table's current snapshot reaches the sentinel (read once per snapshot). */
    private static boolean holdsSentinel(Table table, TableIdentifier id, String keyColumn, long sentinel,
                                         Map<TableIdentifier, Long> seen) {
        table.refresh();
        Snapshot current = table.currentSnapshot();
        if (current == null || Long.valueOf(current.snapshotId()).equals(seen.get(id))) {
            return false;
        }
        seen.put(id, current.snapshotId());
        try (CloseableIterable<FileScanTask> tasks = table.newScan()
                .filter(Expressions.equal(keyColumn, sentinel)).planFiles()) {
            return tasks.iterator().hasNext();
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    private static String unquote(String text) {
        String t = text.trim();
        if (t.length() >= 2 && t.startsWith("'") && t.endsWith("'")) {
            return t.substring(1, t.length() - 1);
        }
        return t;
    }
}
