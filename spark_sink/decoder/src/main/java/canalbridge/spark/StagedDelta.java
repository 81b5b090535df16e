package canalbridge.spark;

import java.util.List;
import org.apache.iceberg.BaseTransaction;
import org.apache.iceberg.ContentFile;
import org.apache.iceberg.ManifestFile;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.Table;
import org.apache.iceberg.TableMetadata;
import org.apache.iceberg.catalog.TableCommit;
import org.apache.iceberg.catalog.TableIdentifier;

/**
 * One table's RowDelta, written and staged in a transaction of the table but not committed: the
 * change {@link CatalogTransaction#publish} sends, with other tables' changes, as one commit of
 * the catalog. Made by {@link EqualityDeltaWriter#stage}.
 */
public final class StagedDelta {
  private final String catalog;
  private final TableIdentifier identifier;
  private final String target;
  private final Table table;
  private final BaseTransaction transaction;
  private final List<ContentFile<?>> files;
  private final String summary;

  StagedDelta(String catalog, TableIdentifier identifier, String target, Table table, BaseTransaction transaction,
      List<ContentFile<?>> files, String summary) {
    this.catalog = catalog;
    this.identifier = identifier;
    this.target = target;
    this.table = table;
    this.transaction = transaction;
    this.files = files;
    this.summary = summary;
  }

  /** The Spark catalog the table is in. */
  public String catalog() {
    return catalog;
  }

  /** The table as the channel names it. */
  public String target() {
    return target;
  }

  /** "data files, delete files, rows written, keys changed", as {@link EqualityDeltaWriter#commit}. */
  public String summary() {
    return summary;
  }

  /** The id of the snapshot the change adds. */
  public long snapshotId() {
    return transaction.currentMetadata().currentSnapshot().snapshotId();
  }

  /**
   * The change for the catalog: the snapshot added and main moved to it, required to apply to
   * the table, and to the main, it was staged on.
   */
  TableCommit tableCommit() {
    TableMetadata start = transaction.startMetadata();
    return TableCommit.create(identifier, start, transaction.currentMetadata());
  }

  /**
   * Delete what staging wrote (data and delete files, the snapshot's own manifests and manifest
   * list). Only for a change known not to have landed: its files are then referenced by nothing.
   */
  public void discard() {
    for (ContentFile<?> file : files) {
      EqualityDeltaWriter.deleteQuietly(table, file.location());
    }
    Snapshot staged = transaction.currentMetadata().currentSnapshot();
    if (staged == null) {
      return;
    }
    try {
      for (ManifestFile manifest : staged.allManifests(table.io())) {
        if (manifest.snapshotId() != null && manifest.snapshotId() == staged.snapshotId()) {
          EqualityDeltaWriter.deleteQuietly(table, manifest.path());
        }
      }
    } catch (RuntimeException ignored) {
      // (a manifest list that cannot be read: what stays is orphan files, for remove_orphan_files)
    }
    EqualityDeltaWriter.deleteQuietly(table, staged.manifestListLocation());
  }
}
