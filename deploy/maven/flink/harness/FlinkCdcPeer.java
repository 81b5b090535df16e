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
 * Then it watches each Iceberg table (a Hadoop catalog under WAREHOUSE) until
 * UNTIL holds in all of them:
 *
 *   sentinel:COLUMN=VALUE     a data file holding VALUE of COLUMN is committed: the value is
 *                             larger than any other ever written, so a file whose column bounds
 *                             reach it holds it, and nothing deletes it (a replayed binlog)
 *   records:N                 the current snapshot counts at least N data records (an initial
 *                             load, whose chunks land in no particular key order)
 *
 * It prints one line per event on stdout:
 *
 *   submitting                the job is about to be submitted (the MiniCluster starts with it)
 *   landed RECORDS            the tables' data records, summed, whenever a commit changed them
 *   visible SECONDS           UNTIL holds in every table, SECONDS after "submitting"
 *
 * then waits for a line on stdin (the benchmark reads this JVM's CPU time
 * first), cancels the job and exits. Any failure ends the JVM with status 1,
 * its stack trace on stderr. Usage:
 *
 *   java [Flink's --add-opens] -Duser.timezone=UTC -cp LIB/*:CLASSES canalbridge.peer.FlinkCdcPeer \
 *       JOB_SQL WAREHOUSE PARALLELISM CHECKPOINT_MS UNTIL TIMEOUT_S NAMESPACE.TABLE...
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
        if (args.length < 7) {
            System.err.println("usage: FlinkCdcPeer JOB_SQL WAREHOUSE PARALLELISM CHECKPOINT_MS UNTIL TIMEOUT_S"
                    + " NAMESPACE.TABLE...");
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
        Until until = Until.parse(args[4]);
        long timeoutNs = Long.parseLong(args[5]) * 1_000_000_000L;

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
        for (int i = 6; i < args.length; i++) {
            TableIdentifier id = TableIdentifier.parse(args[i]);
            waiting.put(id, catalog.loadTable(id));  // created by the job's SQL above
        }
        Map<TableIdentifier, Long> seen = new HashMap<>();  // the last snapshot looked at
        Map<TableIdentifier, Long> records = new HashMap<>();  // its data records
        long landed = 0;
        while (!waiting.isEmpty()) {
            if (System.nanoTime() - submitted > timeoutNs) {
                throw new IllegalStateException(until + " does not hold in " + waiting.keySet()
                        + " after " + timeoutNs / 1_000_000_000L + " s; job status " + client.getJobStatus().get());
            }
            if (client.getJobStatus().get().isGloballyTerminalState()) {
                client.getJobExecutionResult().get();  // throws the job's failure
                throw new IllegalStateException("the job ended before " + until + " held");
            }
            Thread.sleep(POLL_MS);
            waiting.entrySet().removeIf(e -> until.holds(e.getValue(), e.getKey(), seen, records));
            long sum = records.values().stream().mapToLong(Long::longValue).sum();
            if (sum != landed) {
                landed = sum;
                System.out.println("landed " + landed);
                System.out.flush();
            }
        }
        double seconds = (System.nanoTime() - submitted) / 1e9;
        System.out.printf("visible %.3f%n", seconds);
        System.out.flush();
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
        client.cancel().get();
    }

    /** What must hold in every table before the harness reports it visible (UNTIL). */
    private static final class Until {
        private final String keyColumn;  // null: a count of records
        private final long value;

        private Until(String keyColumn, long value) {
            this.keyColumn = keyColumn;
            this.value = value;
        }

        static Until parse(String text) {
            if (text.startsWith("sentinel:") && text.contains("=")) {
                String[] pair = text.substring("sentinel:".length()).split("=", 2);
                return new Until(pair[0], Long.parseLong(pair[1]));
            }
            if (text.startsWith("records:")) {
                return new Until(null, Long.parseLong(text.substring("records:".length())));
            }
            throw new IllegalArgumentException("UNTIL is sentinel:COLUMN=VALUE or records:N, not " + text);
        }

        /** Whether it holds in the table's current snapshot (each snapshot read once); notes its records. */
        boolean holds(Table table, TableIdentifier id, Map<TableIdentifier, Long> seen,
                      Map<TableIdentifier, Long> records) {
            table.refresh();
            Snapshot current = table.currentSnapshot();
            if (current == null || Long.valueOf(current.snapshotId()).equals(seen.get(id))) {
                return false;
            }
            seen.put(id, current.snapshotId());
            long total = Long.parseLong(current.summary().getOrDefault("total-records", "0"));
            records.put(id, total);
            if (keyColumn == null) {
                return total >= value;
            }
            try (CloseableIterable<FileScanTask> tasks = table.newScan()
                    .filter(Expressions.equal(keyColumn, value)).planFiles()) {
                return tasks.iterator().hasNext();
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        }

        @Override
        public String toString() {
            return keyColumn == null ? value + " data records" : "the sentinel " + keyColumn + " = " + value;
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
